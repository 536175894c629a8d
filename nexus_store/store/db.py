"""The database handle every part of the store shares (issue 14).

A `Handle` holds one connection and the `Dialect` of its backend, the token
counter, and what every part needs around them: `Handle.execute` (the one place
a driver call passes through: a driver error leaves it as nexus_store's error, by
the dialect's `translate_error`), `Handle.atomic` (one write transaction, a
savepoint when nested), the lookups of a session's or turn's key by its public
id, and the clock. Parts (`Reading(db)`, `Appends(db)`, ...) take the handle in
their constructor, as sqlite-utils' ``Table(db, name)`` and llm's ``LogStore(db)``
do; none inherits another.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from nexus_store.errors import (
    DatabaseBusy,
    NexusError,
    ReadOnlyError,
    SessionNotFound,
    TurnNotFound,
)
from nexus_store.rows import is_storable_text
from nexus_store.store import driver_errors
from nexus_store.store.pathvalues import PARENT_COLUMNS, PathRow

if TYPE_CHECKING:
    import sqlite_utils

    from nexus_store.store.dialect import Dialect
    from nexus_store.tokens import TokenCounter

__all__ = ["BUSY_RETRY_SECONDS", "Handle", "SessionTail", "unstorable", "utc_now"]

BUSY_RETRY_SECONDS = 30.0
"""How long `Handle.atomic` keeps retrying a busy SQLite file before `DatabaseBusy`."""

_clock: list[Any] = [-1, ""]  # (second, its "YYYY-MM-DDTHH:MM:SS." prefix): strftime is slow

# A turn's row as a parent of new turns (PathRow), by key.
_PARENT_ROW_SQL = (
    f"select {PARENT_COLUMNS} from turns t left join turns pc on pc.id = t.compaction_id "
    "where t.id = ?"
)
# Whether :ancestor (at depth :depth) is on the path of :node: walk up to that depth.
_ANCESTOR_SQL = (
    "with recursive up(id, parent_id, depth) as ("
    " select id, parent_id, depth from turns where id = ?"
    " union all select t.id, t.parent_id, t.depth"
    " from up join turns t on t.id = up.parent_id"
    " where up.depth > ?) select id from up where depth = ?"
)


# The session row after a transaction's appends, written once before anything else runs.
_TAIL_SQL = "update sessions set active_leaf_id = ?, updated_utc = ?, last_seq = ? where id = ?"
# At most this many sessions' rows are remembered between transactions (`known_tail`).
_KNOWN_SESSIONS = 1024


class SessionTail(NamedTuple):
    """A session as a transaction's appends left it, not yet written to its row.

    Appends inside one transaction read the session row once and keep its new state
    here; the handle writes it (`Handle.flush_tails`) before any other statement, so
    every other reader and writer sees the row as if it had been updated per append.
    """

    key: int
    last_seq: int
    fork_key: int | None
    leaf: PathRow
    updated_utc: str


def utc_now() -> str:
    """Now as ISO 8601 UTC with milliseconds, the way JavaScript's toISOString writes it."""
    now = time.time()
    second = int(now)
    if second != _clock[0]:
        _clock[0] = second
        _clock[1] = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
    return f"{_clock[1]}{int((now - second) * 1000):03d}Z"


def unstorable(value: object) -> bool:
    """Whether a value is a string that cannot be a text column (see is_storable_text)."""
    return isinstance(value, str) and not is_storable_text(value)


class Handle:
    """One open database: its connection, dialect and counter, shared by the parts.

    Args:
        conn: The connection (`sqlite3.Connection`, or the PostgreSQL adapter).
        dialect: The backend's `Dialect`.
        where: The file or server, for messages (a URL without its password).
        filename: The database file (None in memory or on a server).
        sqlite_db: The caller's `sqlite_utils.Database` around ``conn``, if it gave one;
            otherwise `sqlite_db` makes one when first asked (SQLite only).
        read_only: Why the database cannot be written (a read-only file or folder),
            or None when it can; `atomic` then refuses every write.
    """

    counter: TokenCounter

    def __init__(
        self,
        conn: Any,
        dialect: Dialect,
        *,
        where: str,
        filename: Path | None = None,
        sqlite_db: sqlite_utils.Database | None = None,
        read_only: str | None = None,
    ) -> None:
        self._conn = conn
        self.read_only = read_only
        self.dialect = dialect
        self.where = where
        self.filename = filename
        self._sqlite_db = sqlite_db
        #: Work a transaction gathers and does once before it commits (by key; see
        #: `store/indexqueue.py`), dropped with the transaction on a rollback.
        self._deferred: dict[str, Callable[[], None]] = {}
        #: Sessions whose row waits for the appends' one update (by public id).
        self._tails: dict[str, SessionTail] = {}
        #: Sessions as this handle's last committed transaction of appends left them
        #: (SQLite): valid while `_known_mark` still matches (`known_tail`).
        self._known: dict[str, SessionTail] = {}
        self._known_mark: tuple[int, int] | None = None
        self._known_valid: bool | None = None  # checked in this transaction (None: not yet)
        self._flushed: dict[str, SessionTail] = {}  # rows this transaction wrote
        self._pure = False  # this transaction ran appends and their row writes only
        self._begin_changes = -1  # the connection's total_changes when it began
        self._version: int | None = None  # PRAGMA data_version in this transaction
        #: True while an append runs its own statements (they need no flush).
        self.appending = False
        #: Text and messages appended since this handle last indexed the search tail
        #: (`store/indexqueue.py`).
        self.unindexed_bytes = 0
        self.unindexed_messages = 0
        #: Work done when the handle closes, by key (indexing the search tail).
        self._at_close: dict[str, Callable[[], None]] = {}

    @property
    def sqlite_db(self) -> sqlite_utils.Database | None:
        """The `sqlite_utils.Database` around the connection (None on PostgreSQL).

        Made on first use: migrations to apply, `Store.db` and the `sql` guards need
        it, reading and writing do not, so opening a current database does not import
        sqlite-utils (issue 17: start-up). The connection already has what wrapping
        it used to set (``recursive_triggers``; `connection.connect`).
        """
        self._pure = False  # (its writes bypass the handle: `known_tail`)
        if self._sqlite_db is None and self.dialect.name == "sqlite":
            import sqlite_utils

            self._sqlite_db = sqlite_utils.Database(
                self._conn, execute_plugins=False, recursive_triggers=False
            )
        return self._sqlite_db

    @property
    def conn(self) -> Any:
        """The driver's connection; pending session rows are written before it is used."""
        if not self.appending:
            self._pure = False
            if self._tails:
                self.flush_tails()
        return self._conn

    # -- the one door to the driver ---------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        """Run one statement; a driver error comes out as the dialect translates it."""
        if not self.appending:
            self._pure = False
            if self._tails:
                self.flush_tails()
        return self._run(sql, params)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (pending session rows stay pending)."""
        return bool(self._conn.in_transaction)

    def _run(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        try:
            return self._conn.execute(sql, params)
        except self.dialect.driver_errors as err:
            translated = self.dialect.translate_error(err, self.where)
            if translated is err:
                raise
            raise translated from err

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        """Run one statement per parameter set (errors translated as by `execute`)."""
        if not self.appending:
            self._pure = False
            if self._tails:
                self.flush_tails()
        try:
            self._conn.executemany(sql, rows)
        except self.dialect.driver_errors as err:
            translated = self.dialect.translate_error(err, self.where)
            if translated is err:
                raise
            raise translated from err

    def close(self) -> None:
        """Close the connection (after the work registered with `at_close`)."""
        hooks, self._at_close = self._at_close, {}
        for work in hooks.values():
            work()
        self._tails.clear()
        self._known.clear()
        self._conn.close()

    def at_close(self, key: str, work: Callable[[], None]) -> None:
        """Do ``work`` when the handle closes (``key`` names it); it must not raise."""
        self._at_close[key] = work

    def has_close_hook(self, key: str) -> bool:
        """Whether ``key``'s work waits for the close."""
        return key in self._at_close

    # -- transactions -------------------------------------------------------------------

    def defer(self, key: str, work: Callable[[], None]) -> None:
        """Do ``work`` once before the current transaction commits (``key`` names it)."""
        self._deferred[key] = work

    def tail(self, session_id: str) -> SessionTail | None:
        """What this transaction's appends left ``session_id`` as (None: its row is current)."""
        return self._tails.get(session_id)

    def set_tail(self, session_id: str, tail: SessionTail) -> None:
        """Record a session's new state after an append (its row is written before commit)."""
        self._tails[session_id] = tail

    def flush_tails(self) -> None:
        """Write the session rows the appends left pending (one update per session)."""
        tails, self._tails = self._tails, {}
        for session_id, tail in tails.items():
            self._run(_TAIL_SQL, [tail.leaf.id, tail.updated_utc, tail.last_seq, tail.key])
            self._known.pop(session_id, None)  # (now stale: the row is as just written)
        self._flushed.update(tails)

    def known_tail(self, session_id: str) -> SessionTail | None:
        """The session as this handle's last commit left it, if nothing changed it since.

        A transaction that ran only appends (`atomic` tracks it) leaves the session rows
        it wrote here; inside a transaction they serve only while it has run nothing
        but appends. The next transaction uses them instead of reading the row again
        (issue 17: a single-turn commit's session read) while both marks hold: the
        connection's ``total_changes`` is what it was right after that commit (no
        statement of this connection changed a row since, committed or rolled back),
        and ``PRAGMA data_version`` is unchanged (no other connection committed). One
        check per transaction; SQLite only (None elsewhere, and when not proven).
        """
        if not self._known or not self._pure:
            return None  # (a statement other than an append ran: it may have moved it)
        if self._known_valid is None:
            self._known_valid = self._known_mark == (self._begin_changes, self._data_version())
            if not self._known_valid:
                self._known.clear()
                return None
        return self._known.get(session_id) if self._known_valid else None

    def taint(self) -> None:
        """Keep this transaction's session rows out of `known_tail` (a failed append)."""
        self._pure = False

    def _data_version(self) -> int:
        if self._version is None:
            self._version = int(self._run("pragma data_version").fetchone()[0])
        return self._version

    def _version_to_remember(self) -> int | None:
        """Before a commit: ``PRAGMA data_version`` if `_remember` will keep its rows.

        Read while the transaction holds the write lock: read after the commit, it could
        already count another connection's commit, which the mark would then hide.
        """
        if self._pure and self._flushed and self.dialect.name == "sqlite":
            return self._data_version()
        return None

    def _remember(self, version: int) -> None:
        """After a commit: keep the rows a transaction of appends only wrote (`known_tail`)."""
        known = self._known if self._known_valid else {}
        if len(known) > _KNOWN_SESSIONS:
            known = {}
        known.update(self._flushed)
        self._known = known
        self._known_mark = (self._conn.total_changes, version)

    def has_deferred(self, key: str) -> bool:
        """Whether ``key``'s work waits for the current transaction's commit."""
        return key in self._deferred

    def flush_deferred(self) -> None:
        """Do the work deferred to the commit now (before another part writes or reads it)."""
        while self._deferred:
            key = next(iter(self._deferred))
            self._deferred.pop(key)()

    @contextlib.contextmanager
    def atomic(self, *, keep_deferred: bool = False) -> Iterator[None]:
        """Run the block in one write transaction (a savepoint when nested).

        The outermost block begins with the dialect's statement (SQLite takes the
        write lock at once, ``BEGIN IMMEDIATE``), retrying with backoff while another
        process holds the lock, up to `BUSY_RETRY_SECONDS`; then `DatabaseBusy`.
        Deferred work (`defer`) is done before the commit, and before a nested block
        unless ``keep_deferred`` (appends, which gather it).

        A driver error that escapes the block (one no part handled) comes out as
        nexus_store's (`driver_errors.translate`, issue 18); the transaction is rolled
        back, so what was committed before is intact.

        Raises:
            ReadOnlyError: If the database cannot be written (`read_only`).
        """
        if self.read_only:
            raise ReadOnlyError(
                f"cannot write to {self.filename}: {self.read_only}; reading works, nothing was "
                "changed"
            )
        if self._conn.in_transaction:
            if not keep_deferred:
                self.flush_deferred()
                if self._tails:
                    self.flush_tails()
            # What the appends left pending before the savepoint stays pending after a
            # rollback to it; what they add inside it is undone with it.
            tails = dict(self._tails)
            flushed = dict(self._flushed)
            # A fixed savepoint name keeps the statements in sqlite3's cache (appends
            # inside a caller's atomic() are the batched hot path); names may nest, on
            # both backends (the innermost of a name is the one released).
            self._run("savepoint nexus_nested")
            try:
                yield
            except BaseException:
                self._tails = tails
                self._flushed = flushed
                self._pure = False
                if self._conn.in_transaction:
                    self._run("rollback to savepoint nexus_nested")
                    self._run("release savepoint nexus_nested")
                raise
            self._run("release savepoint nexus_nested")
            return
        self._deferred.clear()
        self._tails.clear()
        self._begin()
        self._start_marks()
        try:
            yield
            self.flush_deferred()
            if self._tails:
                self.flush_tails()
            version = self._version_to_remember()
            self._run("commit")
            if version is not None:
                self._remember(version)
        except BaseException as err:
            self._deferred.clear()
            self._tails.clear()
            if self._conn.in_transaction:
                with contextlib.suppress(*self.dialect.driver_errors, NexusError):
                    self._conn.execute("rollback")
            if driver_errors.is_driver_error(err):  # issue 18: no raw driver error escapes
                raise driver_errors.translate(err, self.where) from err
            raise
        finally:
            self._begin_changes = -1
            self._known_valid = None
            self._version = None
            self._pure = False

    def _start_marks(self) -> None:
        """A new transaction: nothing checked, nothing written yet (`known_tail`)."""
        self._flushed = {}
        self._version = None
        self._known_valid = None
        sqlite = self.dialect.name == "sqlite"
        self._begin_changes = self._conn.total_changes if sqlite else -1
        self._pure = True

    def _begin(self) -> None:
        deadline = time.monotonic() + BUSY_RETRY_SECONDS
        delay = 0.005
        while True:
            try:
                self.execute(self.dialect.begin_sql)
                return
            except DatabaseBusy:
                if time.monotonic() > deadline:
                    raise DatabaseBusy(
                        f"the database {self.where} is locked by another writer and stayed "
                        f"locked for {BUSY_RETRY_SECONDS:.0f}s; try again",
                        where=self.where,
                    ) from None
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.2)

    # -- keys ---------------------------------------------------------------------------

    def session_row(self, session_id: str) -> tuple[int, int | None]:
        """``(key, active leaf key)`` of a session.

        Raises:
            SessionNotFound: If there is no such session.
        """
        if unstorable(session_id):
            raise SessionNotFound(f"no session with id {session_id!r} (not valid UTF-8)")
        row = self.execute(
            "select id, active_leaf_id from sessions where uid = ?", [session_id]
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return row[0], row[1]

    def session_key(self, session_id: str) -> int:
        """The key of a session (raises SessionNotFound)."""
        return self.session_row(session_id)[0]

    def turn_key(self, session_key: int, session_id: str, turn_id: str) -> int:
        """The key of a turn of a session.

        Raises:
            TurnNotFound: If the session has no such turn.
        """
        if unstorable(turn_id):
            raise TurnNotFound(f"no turn with id {turn_id!r} in session {session_id!r}")
        row = self.execute(
            "select id from turns where session_id = ? and uid = ?", [session_key, turn_id]
        ).fetchone()
        if row is None:
            raise TurnNotFound(f"no turn with id {turn_id!r} in session {session_id!r}")
        return int(row[0])

    def parent_row(self, key: int) -> PathRow | None:
        """A turn's row as the parent (or fork point) of new turns."""
        row = self.execute(_PARENT_ROW_SQL, [key]).fetchone()
        return None if row is None else PathRow._make(row)

    def is_ancestor(self, ancestor: PathRow, node: PathRow) -> bool:
        """Whether ``ancestor`` is ``node`` or one of its ancestors."""
        if node.depth < ancestor.depth:
            return False
        row = self.execute(_ANCESTOR_SQL, [node.id, ancestor.depth, ancestor.depth]).fetchone()
        return row is not None and row[0] == ancestor.id

    def allocate_keys(self, count: int, floor: int) -> list[int]:
        """Keys for ``count`` new turns, each at least ``floor``, in increasing order."""
        return self.dialect.allocate_keys(self, count, floor)

    def next_turn_key(self) -> int:
        """A key for one new turn taken before its insert (a compaction names itself)."""
        return int(self.execute(self.dialect.statements.next_turn_key).fetchone()[0])

    def lock_session(self, session_id: str) -> None:
        """Serialize the appends of one session (inside a transaction)."""
        self.dialect.lock_session(self, session_id)
