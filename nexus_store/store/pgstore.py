"""`PostgresStore`: the same `Store` on a PostgreSQL server.

``Store("postgresql://...")`` returns one of these. It differs from the SQLite store
only in how it opens, migrates and runs transactions; every read and write is the
mixins' code over `nexus_store.store.pg.PgConnection`.

Concurrency: writers on different connections (and hosts) run at once; there is no
global lock. An append locks its session's row (``select ... for no key update``) before
it reads the parent and the session's last seq, so the appends of one session are
serialized (two writers on one parent make two siblings, nothing is lost) while
appends to other sessions proceed in parallel. Keys come from identity sequences.

Migrations: ``schema/postgres/NNNN_name.sql``, numbered like ``schema/``; each file
is applied with its row in ``nexus_migrations`` in one transaction (PostgreSQL DDL
is transactional), under an advisory lock so that processes opening a new database
at once migrate it once. A database recording a migration this code does not know
was written by a newer nexus_store and is refused.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from nexus_store.errors import (
    InvalidEntry,
    InvalidQuery,
    NexusError,
    SchemaOutOfDate,
    StoreOpenError,
)
from nexus_store.store.core import Store
from nexus_store.store.driver_errors import is_driver_error, translate
from nexus_store.store.pg import PgConnection, connect, redact
from nexus_store.store.search import PG_SEARCH_MESSAGES_SQL, PG_SEARCH_SUMMARIES_SQL
from nexus_store.tokens import TokenCounter
from nexus_store.workspace import WorkspaceFile

__all__ = ["PostgresStore", "pg_schema_files"]

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


class PostgresStore(Store):
    """A nexus_store database on a PostgreSQL server (see `Store` for the API).

    Args:
        path: A ``postgresql://`` URL (libpq form: user, password, host, port,
            database, and query options such as ``host=/socket/dir`` or
            ``options=-csearch_path=myschema`` to keep the tables in a schema).
        memory: Not supported (raises ValueError).
        counter: As for `Store`.
        synchronous: ``"NORMAL"`` (default) keeps the server's ``synchronous_commit``;
            ``"FULL"`` sets it ``on`` for this connection; ``"OFF"`` sets it ``off``
            (a server crash may lose the last commits, never corrupts).
        busy_timeout: Seconds to connect; lock waits give up after 30 s.

    Raises:
        StoreOpenError: If psycopg is missing, the server cannot be reached, or the
            database holds a ``sessions`` table of another program.
        SchemaOutOfDate: If the database was written by a newer nexus_store.
    """

    def __init__(
        self,
        path: Any = None,
        *,
        memory: bool = False,
        counter: str | TokenCounter | None = None,
        synchronous: str = "NORMAL",
        busy_timeout: float = 5.0,
    ) -> None:
        if memory:
            raise ValueError("memory=True is for SQLite; give a postgresql:// URL or a file path")
        mode = synchronous.upper()
        if mode not in ("NORMAL", "FULL", "OFF"):
            raise ValueError(f"synchronous must be NORMAL, FULL or OFF, not {synchronous!r}")
        self.url = str(path)
        self.filename = None
        self._savepoints = 0
        raw = connect(self.url, timeout=busy_timeout)
        # The mixins use the sqlite3.Connection methods PgConnection implements.
        self.conn = cast(sqlite3.Connection, PgConnection(raw, redact(self.url)))
        try:
            raw.execute("set lock_timeout = '30s'")
            if mode == "FULL":
                raw.execute("set synchronous_commit = on")
            elif mode != "NORMAL":
                raw.execute("set synchronous_commit = off")
            self._check_ours()
            self._migrate()
            self.counter = self._resolve_counter(counter)
        except BaseException:
            raw.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"

    # -- opening ---------------------------------------------------------------------

    def _check_ours(self) -> None:
        row = self.conn.execute(
            "select to_regclass('sessions') is not null, "
            "to_regclass('nexus_migrations') is not null"
        ).fetchone()
        if row[0] and not row[1]:
            raise StoreOpenError(
                f"{redact(self.url)} has a sessions table of another program (no "
                "nexus_migrations); use another database, or a schema of its own "
                "(options=-csearch_path=nexus)"
            )

    def _migrate(self) -> None:
        files = pg_schema_files()
        known = {path.stem for path in files}
        with self.atomic():
            self.conn.execute("select pg_advisory_xact_lock(?)", [_MIGRATE_LOCK])
            self.conn.execute(_MIGRATIONS_TABLE_SQL)
            done = [
                row[0]
                for row in self.conn.execute(
                    "select name from nexus_migrations where migration_set = ? order by name",
                    [MIGRATION_SET],
                )
            ]
            unknown = [name for name in done if name not in known]
            if unknown:
                raise SchemaOutOfDate(
                    f"the database was written by a newer nexus_store (schema {unknown[-1]} is "
                    f"unknown to this version, which knows up to {max(known)}); upgrade "
                    "nexus_store to open it"
                )
            raw = cast(PgConnection, self.conn).raw
            for path in files:
                if path.stem in done:
                    continue
                with self.atomic():  # a savepoint per file: the file and its row together
                    raw.execute(path.read_text(encoding="utf-8").encode())
                    self.conn.execute(
                        "insert into nexus_migrations (migration_set, name, applied_at) "
                        "values (?, ?, ?)",
                        [MIGRATION_SET, path.stem, _utc_now()],
                    )

    def applied_migrations(self) -> list[str]:
        """Names of the migrations recorded in the database, in order."""
        return [
            row[0]
            for row in self.conn.execute(
                "select name from nexus_migrations where migration_set = ? order by name",
                [MIGRATION_SET],
            )
        ]

    def analyze(self) -> None:
        """Refresh the planner's statistics of the store's tables.

        Autovacuum does this on its own as tables grow; `copy_to` calls it after a
        bulk copy. Until a table has statistics, PostgreSQL may plan the context query
        as a scan of the session instead of one range scan per run.
        """
        self.conn.execute("analyze sessions, turns, messages")

    # -- transactions ----------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Store]:
        """Run the block in one transaction (a savepoint when nested).

        Appends lock their session's row inside it; other sessions are not blocked.
        """
        if self.conn.in_transaction:
            self._savepoints += 1
            name = f"nexus_sp{self._savepoints}"
            self.conn.execute(f"savepoint {name}")
            try:
                yield self
            except BaseException:
                self.conn.execute(f"rollback to savepoint {name}")
                self.conn.execute(f"release savepoint {name}")
                raise
            else:
                self.conn.execute(f"release savepoint {name}")
            finally:
                self._savepoints -= 1
            return
        self.conn.execute("begin")
        try:
            yield self
            self.conn.execute("commit")
        except BaseException as err:
            if self.conn.in_transaction:
                with contextlib.suppress(Exception):
                    self.conn.execute("rollback")
            if is_driver_error(err):  # issue 18: no raw driver error reaches a caller
                raise translate(err, self._where()) from err
            raise

    def _where(self) -> str:
        return redact(self.url)

    def _allocate_keys(self, count: int, floor: int) -> list[int]:
        # Concurrent writers never share a sequence value; keys need not be contiguous.
        rows = self.conn.execute(
            "select nextval(pg_get_serial_sequence('turns', 'id')) from generate_series(1, ?)",
            [count],
        ).fetchall()
        return sorted(int(row[0]) for row in rows)

    def _lock_session(self, session_id: str) -> None:
        # Serializes the appends of one session (READ COMMITTED: the statements that
        # follow see the rows the previous holder committed). NO KEY UPDATE, not
        # UPDATE: foreign-key checks (a turn's session_id, a fork's parent) still pass.
        cast(PgConnection, self.conn).defer(
            "select id from sessions where uid = ? for no key update", [session_id]
        )

    def _ensure_imported_session(self, *args: Any) -> tuple[int, str]:
        key, uid = super()._ensure_imported_session(*args)
        self.conn.execute("select id from sessions where id = ? for no key update", [key])
        return key, uid

    # -- search (SearchMixin.search, with PostgreSQL's text search underneath) ------------

    def _message_matches(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self.conn.execute(PG_SEARCH_MESSAGES_SQL, _pg_search_params(params)).fetchall()

    def _summary_matches(self, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return self.conn.execute(PG_SEARCH_SUMMARIES_SQL, _pg_search_params(params)).fetchall()

    # -- workspace records (WorkspaceMixin, schema/postgres/0003_workspace.sql) -----------

    def _check_workspace_text(self, file: WorkspaceFile) -> None:
        super()._check_workspace_text(file)
        for what, text in (("path", file.path), ("content", file.content)):
            if "\x00" in text:
                raise InvalidEntry(
                    f"workspace file {file.path!r}: its {what} holds a NUL character, which "
                    "PostgreSQL text cannot store (SQLite can); nothing recorded"
                )

    # -- doctor (MaintenanceMixin): the store's own checks; the server checks its files ---

    def _check_storage(self, found: list[Any]) -> None:
        """Add nothing: the server enforces foreign keys and checks its own files.

        (amcheck and pg_checksums are the tools for the files.)
        """

    # -- not on PostgreSQL yet ----------------------------------------------------------
    # gc (SQLite's deferred foreign keys, VACUUM) has no PostgreSQL port yet: it refuses
    # with one clear line instead of a SQL error.

    def _not_yet(self, what: str) -> NexusError:
        return NexusError(
            f"{what} is not available on PostgreSQL yet (SQLite only); copy the session to a "
            "SQLite file with `nexus-store copy` to use it"
        )

    def _bulk_index_begin(self) -> None:
        """PostgreSQL's search indexes are GIN indexes on expressions: nothing to pause."""
        return None

    def gc(self, *args: Any, **kwargs: Any) -> Any:
        """Not on PostgreSQL yet."""
        raise self._not_yet("gc")

    def backup(self, dest: Any, *, force: bool = False) -> int:
        """PostgreSQL has its own tools (issue 18)."""
        raise NexusError(
            "backup copies a SQLite file; on PostgreSQL use pg_dump (or `nexus-store copy "
            "--to FILE.db` for a SQLite copy of the sessions)"
        )


def _utc_now() -> str:
    from nexus_store.store.core import utc_now

    return utc_now()


def _pg_search_params(params: dict[str, Any]) -> dict[str, Any]:
    """SearchMixin's parameters, with the snippet's markers and length for ts_headline."""
    for marker in (params["open"], params["close"]):
        if '"' in marker or "," in marker:
            raise InvalidQuery(
                f"snippet marker {marker!r} holds a double quote or a comma, which "
                "PostgreSQL's ts_headline options cannot carry; choose another marker"
            )
    words = max(2, int(params["tokens"]))
    headline = (
        f'StartSel="{params["open"]}", StopSel="{params["close"]}", '
        f"MaxWords={words}, MinWords={max(1, words // 2)}, ShortWord=0"
    )
    return {**params, "headline": headline}
