"""One dialect object per backend: SQLite and PostgreSQL (issue 14).

A `Dialect` owns what differs between the backends, and nothing else: opening and
configuring a connection, its migration runner, the few statements that differ
(`Statements`, named and written out in full in `nexus_store.store.sql`, never
rewritten from the SQLite text), the key allocation and session lock of an
append, what the backend can do (`Capabilities`, which callers and tests ask
before calling what a backend lacks), and the mapping of driver errors to
nexus_store's errors (`Dialect.translate_error`, called by `Handle.execute`, the one
place every driver call passes through). Every other statement is shared.
"""

from __future__ import annotations

import random
import sqlite3
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

from nexus_store import migrate
from nexus_store.errors import (
    ConstraintViolation,
    NexusError,
    SchemaOutOfDate,
    StorageError,
    StoreOpenError,
)
from nexus_store.store import compressed, connection, driver_errors
from nexus_store.store.db import Handle, utc_now
from nexus_store.store.sql import (
    CONTEXT_SQL,
    INSERT_TURN_SQL,
    PATH_SQL,
    PG_CONTEXT_SQL,
    PG_INSERT_TURN_SQL,
    PG_PATH_SQL,
    TURN_COLUMNS,
    insert_rows_sql,
)
from nexus_store.store.urls import redact

if TYPE_CHECKING:
    import sqlite_utils

    from nexus_store.store.pg import PgConnection

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Capabilities",
    "Dialect",
    "PostgresDialect",
    "SqliteDialect",
    "Statements",
]


class Capabilities(NamedTuple):
    """What a backend offers beyond the common API; ask before calling.

    Attributes:
        gc: `Store.gc` removes rows and reclaims space (SQLite only for now).
        fts_bm25: Search is FTS5 syntax ranked by BM25; otherwise web-search syntax
            ranked by ``ts_rank_cd`` (PostgreSQL).
        file_checks: doctor checks the database file itself (integrity, foreign
            keys, WAL size, permissions); a server checks its own files.
        nul_in_text: Text columns hold a NUL character (PostgreSQL text cannot).
        compressed_content: Large message content is stored zstd-compressed
            (`compressed`, schema 0065); PostgreSQL's TOAST compresses it instead.
    """

    gc: bool
    fts_bm25: bool
    file_checks: bool
    nul_in_text: bool
    compressed_content: bool


SQLITE = Capabilities(
    gc=True, fts_bm25=True, file_checks=True, nul_in_text=True, compressed_content=True
)
POSTGRES = Capabilities(
    gc=False, fts_bm25=False, file_checks=False, nul_in_text=False, compressed_content=False
)


class Statements(NamedTuple):
    """The statements whose text differs between backends (see `nexus_store.store.sql`).

    Attributes:
        path: The turn keys on the path from a leaf (PATH_SQL).
        context: The rows of a leaf's context (CONTEXT_SQL).
        insert_turn: One turn; returns its key, or no row when its id is taken.
        insert_turns: Turns with their keys given (bulk; a taken id is an error).
        insert_setting: A settings row, unless the key is there already.
        next_turn_key: A key for a turn, taken before its insert.
    """

    path: str
    context: str
    insert_turn: str
    insert_turns: str
    insert_setting: str
    next_turn_key: str


class Dialect(ABC):
    """What a backend does its own way (see the module docstring).

    Subclasses set the class attributes and implement the methods.
    """

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    statements: ClassVar[Statements]
    begin_sql: ClassVar[str]
    synchronous_modes: ClassVar[tuple[str, ...]]
    synchronous_hint: ClassVar[str]
    driver_errors: tuple[type[BaseException], ...]
    #: A failed statement undoes only itself and the transaction goes on (SQLite);
    #: PostgreSQL aborts the whole transaction, so a write that may fail inside a
    #: caller's transaction needs a savepoint there.
    statement_rollback: ClassVar[bool]

    @abstractmethod
    def translate_error(self, err: BaseException, where: str) -> BaseException:
        """The nexus_store error a driver error means, or ``err`` itself (re-raised as is)."""

    def check_synchronous(self, mode: str, given: str) -> None:
        """Refuse a synchronous mode this backend has not (before connecting).

        Raises:
            ValueError: If ``mode`` (``given``, upper-cased) is not one of them.
        """
        if mode not in self.synchronous_modes:
            raise ValueError(f"synchronous must be {self.synchronous_hint}, not {given!r}")

    @abstractmethod
    def configure(self, db: Handle, synchronous: str, busy_timeout: float) -> None:
        """Set the connection's options (after `check_ours`)."""

    @abstractmethod
    def check_ours(self, db: Handle) -> None:
        """Refuse a database of another program before anything is written to it."""

    @abstractmethod
    def migrate(self, db: Handle) -> None:
        """Apply the pending migrations; refuse a database newer than this code."""

    @abstractmethod
    def applied_migrations(self, db: Handle) -> list[str]:
        """Names of the migrations recorded in the database, in order."""

    @abstractmethod
    def allocate_keys(self, db: Handle, count: int, floor: int) -> list[int]:
        """Keys for ``count`` new turns, each at least ``floor``, in increasing order."""

    @abstractmethod
    def lock_session(self, db: Handle, session_id: str) -> None:
        """Serialize the appends of one session (inside a transaction)."""

    @abstractmethod
    def insert_turn(self, db: Handle, values: Mapping[str, Any]) -> int | None:
        """Insert one turn (``values`` by `TURN_COLUMNS`): its key, or None if its id is taken."""

    @abstractmethod
    def insert_key(self, db: Handle, sql: str, params: Any) -> int:
        """Run an ``insert`` of one row and return the key the database gave it."""

    @abstractmethod
    def analyze(self, db: Handle) -> None:
        """Refresh the planner's statistics of the store's tables."""


class SqliteDialect(Dialect):
    """SQLite through the standard library and sqlite-utils: one writer at a time."""

    name = "sqlite"
    capabilities = SQLITE
    statements = Statements(
        path=PATH_SQL,
        context=CONTEXT_SQL,
        insert_turn=INSERT_TURN_SQL,
        insert_turns=INSERT_TURN_SQL,
        insert_setting="insert or ignore into settings (key, value) values (?, ?)",
        # the write lock is held (BEGIN IMMEDIATE), so max(id) + 1 is ours
        next_turn_key="select coalesce(max(id), 0) + 1 from turns",
    )
    begin_sql = "begin immediate"
    statement_rollback = True
    synchronous_modes = ("NORMAL", "FULL", "OFF", "EXTRA")
    synchronous_hint = "NORMAL or FULL"
    driver_errors = (sqlite3.Error,)

    def translate_error(self, err: BaseException, where: str) -> BaseException:
        """Busy or locked: `DatabaseBusy`; an integrity error: `ConstraintViolation`.

        A full disk, a damaged file or a driver limit: their `StorageError`
        (`driver_errors.translate`, issue 18). Any other SQLite error (a SQL error a
        part recognizes, such as FTS5 syntax) is returned as is.
        """
        if (
            isinstance(err, sqlite3.IntegrityError)
            or driver_errors.is_busy(err)
            or driver_errors.is_environmental(err)
        ):
            return driver_errors.translate(err, where)
        return err

    @staticmethod
    def connect(
        path: str | Path | sqlite_utils.Database | None, *, memory: bool, busy_timeout: float
    ) -> tuple[sqlite3.Connection, sqlite_utils.Database | None, Path | None, bool, str | None]:
        """Open (or create, owner-only) the file.

        sqlite-utils is not imported here: the handle wraps the connection in a
        `sqlite_utils.Database` when something first needs one (migrations to apply,
        `Store.db`), so opening a current database does not pay for it (issue 17).

        Returns:
            ``(connection, database, filename, created, read_only)``: ``database`` is
            the caller's `sqlite_utils.Database` when one was given, else None;
            ``read_only`` says why an existing file cannot be written (a read-only
            file or folder), else None; such a file is opened read-only, and reading
            works.

        Raises:
            StoreOpenError: If the path is not a SQLite database or cannot be created.
        """
        given = sys.modules.get("sqlite_utils")  # a Database given means it is imported
        if given is not None and isinstance(path, given.Database):
            path.conn.isolation_level = None
            compressed.register(path.conn)
            return path.conn, path, None, False, None
        if memory or path is None or str(path) == ":memory:":
            if path is None and not memory:
                raise ValueError("give a database path, or memory=True")
            conn = connection.connect(":memory:", timeout=busy_timeout)
            return conn, None, None, False, None
        filename = Path(cast("str | Path", path))  # not a Database: that returned above
        created = False
        read_only = None
        if filename.exists():
            connection.check_existing(filename)
            read_only = connection.read_only_reason(filename)
        else:
            connection.create_private(filename)
            created = True
        if read_only:
            conn = connection.connect_read_only(filename, timeout=busy_timeout)
        else:
            conn = connection.connect(str(filename), timeout=busy_timeout)
        return conn, None, filename, created, read_only

    def configure(self, db: Handle, synchronous: str, busy_timeout: float) -> None:
        """WAL, the synchronous mode, foreign keys, a busy timeout."""
        conn = db.conn
        try:
            if db.filename is not None and not db.read_only:
                mode = conn.execute("pragma journal_mode=wal").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreOpenError(f"cannot switch {db.filename} to WAL mode (got {mode})")
            conn.execute(f"pragma synchronous={synchronous}")
            # Checkpoint every 1,000 WAL pages (about 4 MB, SQLite's default): committed
            # data waits at most that long in -wal before it is in the .db file, which
            # people copy as a backup (issue 18; 10,000 pages let ~40 MB live only in
            # -wal). A large WAL is truncated back to 16 MB after a checkpoint.
            # `nexus-store backup` makes a whole copy whatever the WAL holds.
            conn.execute("pragma wal_autocheckpoint=1000")
            conn.execute("pragma journal_size_limit=16777216")
            conn.execute("pragma foreign_keys=on")
            conn.execute(f"pragma busy_timeout={int(busy_timeout * 1000)}")
        except StorageError as err:  # a damaged file: the message says what to do
            raise StoreOpenError(str(err)) from None
        except sqlite3.DatabaseError as err:
            raise StoreOpenError(f"cannot open {db.filename}: {err}") from None

    def check_ours(self, db: Handle) -> None:
        """Refuse a SQLite file of another program (tables, but no nexus_store schema)."""
        try:
            tables = {
                row[0]
                for row in db.conn.execute("select name from sqlite_master where type = 'table'")
            }
        except StorageError as err:  # a damaged file: the message says what to do
            raise StoreOpenError(str(err)) from None
        except sqlite3.DatabaseError as err:
            raise StoreOpenError(f"cannot read {db.filename}: {err}") from None
        if tables and not (tables & {"_sqlite_migrations", "sessions"}):
            raise StoreOpenError(
                f"{db.filename} is a SQLite database of another program (it has tables but no "
                "nexus_store schema); choose another path"
            )

    def migrate(self, db: Handle) -> None:
        """sqlite-utils migrations from ``schema/``, retried while another process migrates."""
        if migrate.is_current(db.conn):  # the usual open: nothing to apply or refuse
            return
        assert db.sqlite_db is not None  # a SQLite handle always has one
        migrations = migrate.build_migrations()
        if db.read_only:
            migrate.refuse_pending(db.sqlite_db, migrations, f"{db.read_only}; nothing was changed")
            return
        for attempt in range(100):
            try:
                migrate.ensure_current(db.sqlite_db, migrations)
                return
            except sqlite3.OperationalError as err:
                busy = "locked" in str(err).lower() or "busy" in str(err).lower()
                if not busy or attempt == 99:
                    if "readonly" in str(err).lower():
                        raise StoreOpenError(f"cannot write {db.filename}: read-only") from None
                    raise
                time.sleep(0.05 + random.random() * 0.1)

    def applied_migrations(self, db: Handle) -> list[str]:
        """Names of the migrations recorded in ``_sqlite_migrations``."""
        assert db.sqlite_db is not None  # a SQLite handle always has one
        return migrate.applied(db.sqlite_db)

    def allocate_keys(self, db: Handle, count: int, floor: int) -> list[int]:
        """Past max(id): the write lock is held (BEGIN IMMEDIATE), so they are ours."""
        top = int(db.execute("select coalesce(max(id), 0) from turns").fetchone()[0])
        first = max(top + 1, floor)
        return list(range(first, first + count))

    def lock_session(self, db: Handle, session_id: str) -> None:
        """Nothing: BEGIN IMMEDIATE already serializes every writer."""

    def insert_turn(self, db: Handle, values: Mapping[str, Any]) -> int | None:
        """The rowid; a taken (session, uid) pair is SQLite's integrity error.

        Only the columns that hold a value are named (`insert_rows_sql`): a message
        turn leaves most of the 44 NULL, and SQLite binds and encodes fewer values.
        """
        columns = tuple([c for c in TURN_COLUMNS if values[c] is not None])
        sql = insert_rows_sql("turns", columns)
        try:
            return int(db.execute(sql, [values[c] for c in columns]).lastrowid or 0)
        except ConstraintViolation as err:
            if "uid" not in str(err):
                raise
            return None

    def insert_key(self, db: Handle, sql: str, params: Any) -> int:
        """The rowid SQLite gave the row."""
        return int(db.execute(sql, params).lastrowid or 0)

    def analyze(self, db: Handle) -> None:
        """SQLite's ANALYZE of the store's tables."""
        db.execute("analyze")


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg 3 (`nexus_store.store.pg`): writers run at once.

    An append locks its session's row (``select ... for no key update``) before it
    reads the parent and the session's last seq, so the appends of one session are
    serialized while other sessions proceed. Keys come from identity sequences.
    Migrations are ``schema/postgres/NNNN_name.sql``, each applied with its row in
    ``nexus_migrations`` in one transaction, under an advisory lock.
    """

    name = "postgres"
    capabilities = POSTGRES
    statements = Statements(
        path=PG_PATH_SQL,
        context=PG_CONTEXT_SQL,
        insert_turn=PG_INSERT_TURN_SQL,
        insert_turns=INSERT_TURN_SQL,
        insert_setting=(
            "insert into settings (key, value) values (?, ?) on conflict (key) do nothing"
        ),
        # concurrent writers never share a sequence value
        next_turn_key="select nextval(pg_get_serial_sequence('turns', 'id'))",
    )
    begin_sql = "begin"
    statement_rollback = False
    synchronous_modes = ("NORMAL", "FULL", "OFF")
    synchronous_hint = "NORMAL, FULL or OFF"
    # set by __init__ (importing psycopg at class creation cost every command ~0.1 s)
    driver_errors: tuple[type[BaseException], ...] = ()

    # `nexus_store.store.pg` is imported by the methods that need it: opening a SQLite
    # file does not load it (issue 17: start-up).
    def __init__(self, url: str) -> None:
        from nexus_store.store import pg

        self.url = url
        self.driver_errors = pg.driver_errors()

    def translate_error(self, err: BaseException, where: str) -> BaseException:
        """Psycopg's errors as nexus_store's (none reaches a caller)."""
        from nexus_store.store import pg

        return pg.translate_error(err, where)

    @staticmethod
    def connect(url: str, *, busy_timeout: float) -> PgConnection:
        """Open an autocommit connection behind `pg.PgConnection`."""
        from nexus_store.store import pg

        return pg.PgConnection(pg.connect(url, timeout=busy_timeout))

    def configure(self, db: Handle, synchronous: str, busy_timeout: float) -> None:
        """A 30 s lock timeout; ``synchronous_commit`` from the synchronous mode."""
        db.execute("set lock_timeout = '30s'")
        if synchronous == "FULL":
            db.execute("set synchronous_commit = on")
        elif synchronous != "NORMAL":
            db.execute("set synchronous_commit = off")

    def check_ours(self, db: Handle) -> None:
        """Refuse a database whose ``sessions`` table is another program's."""
        row = db.execute(
            "select to_regclass('sessions') is not null, "
            "to_regclass('nexus_migrations') is not null"
        ).fetchone()
        if row[0] and not row[1]:
            raise StoreOpenError(
                f"{redact(self.url)} has a sessions table of another program (no "
                "nexus_migrations); use another database, or a schema of its own "
                "(options=-csearch_path=nexus)"
            )

    def migrate(self, db: Handle) -> None:
        """Apply ``schema/postgres`` files in order, each with its row, under a lock."""
        files = pg_schema_files()
        known = {path.stem for path in files}
        with db.atomic():
            db.execute("select pg_advisory_xact_lock(?)", [_MIGRATE_LOCK])
            db.execute(_MIGRATIONS_TABLE_SQL)
            done = self.applied_migrations(db)
            unknown = [name for name in done if name not in known]
            if unknown:
                raise SchemaOutOfDate(
                    f"the database was written by a newer nexus_store (schema {unknown[-1]} is "
                    f"unknown to this version, which knows up to {max(known)}); upgrade "
                    "nexus_store to open it"
                )
            for path in files:
                if path.stem in done:
                    continue
                with db.atomic():  # a savepoint per file: the file and its row together
                    try:
                        db.conn.run_script(path.read_text(encoding="utf-8"))
                    except self.driver_errors as err:
                        translated = self.translate_error(err, db.where)
                        raise translated from err
                    db.execute(
                        "insert into nexus_migrations (migration_set, name, applied_at) "
                        "values (?, ?, ?)",
                        [MIGRATION_SET, path.stem, utc_now()],
                    )

    def applied_migrations(self, db: Handle) -> list[str]:
        """Names recorded in ``nexus_migrations``."""
        return [
            row[0]
            for row in db.execute(
                "select name from nexus_migrations where migration_set = ? order by name",
                [MIGRATION_SET],
            )
        ]

    def allocate_keys(self, db: Handle, count: int, floor: int) -> list[int]:
        """A block of the identity sequence (keys need not be contiguous)."""
        rows = db.execute(
            "select nextval(pg_get_serial_sequence('turns', 'id')) from generate_series(1, ?)",
            [count],
        ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def lock_session(self, db: Handle, session_id: str) -> None:
        """Lock the session's row until commit.

        READ COMMITTED: the statements that follow see the rows the previous holder
        committed. NO KEY UPDATE, not UPDATE: foreign-key checks (a turn's
        session_id, a fork's parent) still pass. Sent with the next statement.
        """
        db.conn.defer("select id from sessions where uid = ? for no key update", [session_id])

    def insert_turn(self, db: Handle, values: Mapping[str, Any]) -> int | None:
        """``returning id``; no row when ``on conflict do nothing`` skipped a taken id."""
        row = db.execute(self.statements.insert_turn, [values[c] for c in TURN_COLUMNS]).fetchone()
        return None if row is None else int(row[0])

    def insert_key(self, db: Handle, sql: str, params: Any) -> int:
        """The key from ``returning id``."""
        return int(db.execute(sql + " returning id", params).fetchone()[0])

    def analyze(self, db: Handle) -> None:
        """Refresh the statistics of sessions, turns and messages.

        Autovacuum does this on its own as tables grow; `copy_to` calls it after a
        bulk copy. Until a table has statistics, PostgreSQL may plan the context query
        as a scan of the session instead of one range scan per run.
        """
        db.execute("analyze sessions, turns, messages")


MIGRATION_SET = "nexus_store"
# pg_advisory_xact_lock key for migrations: "nexus_st" as a 64-bit integer.
_MIGRATE_LOCK = int.from_bytes(b"nexus_st", "big") & 0x7FFF_FFFF_FFFF_FFFF

_MIGRATIONS_TABLE_SQL = """
create table if not exists nexus_migrations (
    migration_set text not null,
    name text not null,
    applied_at text not null,
    primary key (migration_set, name)
)
"""


def pg_schema_files() -> list[Path]:
    """The PostgreSQL schema files in the order they apply (``schema/postgres``)."""
    here = Path(__file__).resolve().parent.parent
    for folder in (here / "_schema" / "postgres", here.parent / "schema" / "postgres"):
        if folder.is_dir():
            return sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    raise FileNotFoundError("nexus_store PostgreSQL schema files not found (schema/postgres)")


def not_available(what: str, dialect: Dialect) -> NexusError:
    """The error for a call a backend's capabilities do not include."""
    return NexusError(
        f"{what} is not available on {'PostgreSQL' if dialect.name == 'postgres' else 'SQLite'} "
        "yet (SQLite only); copy the session to a SQLite file with `nexus-store copy` to use it"
    )
