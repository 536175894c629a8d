"""`Store`: the one door to the database.

A `Store` owns one SQLite connection (through a `sqlite_utils.Database`), opens or
creates and migrates the file, and does every read and write of sessions and
turns. Writes run in ``BEGIN IMMEDIATE`` transactions, so that concurrent writers
queue on SQLite's lock instead of failing; a busy database is retried with backoff
inside the store. Two writers appending to the same parent make two siblings, a
branch, and lose nothing. Reading methods live in `nexus_store.store.reading`.
"""

from __future__ import annotations

import contextlib
import json
import random
import secrets
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from nexus_store import migrate
from nexus_store.errors import (
    InvalidEntry,
    NexusError,
    ReadOnlyError,
    SessionNotFound,
    StorageError,
    StoreOpenError,
    TurnNotFound,
)
from nexus_store.models import Session, Turn
from nexus_store.rows import (
    dumps,
    encode_entry_fields,
    is_storable_text,
    message_rows,
    turn_payload,
)
from nexus_store.store import connection
from nexus_store.store.backup import backup_sqlite
from nexus_store.store.compaction import CompactionMixin
from nexus_store.store.copying import CopyMixin
from nexus_store.store.driver_errors import is_driver_error, translate
from nexus_store.store.ingest import IngestMixin
from nexus_store.store.leaves import dangling
from nexus_store.store.maintenance import MaintenanceMixin
from nexus_store.store.pg import is_postgres_url
from nexus_store.store.reading import ReadingMixin
from nexus_store.store.search import SearchMixin
from nexus_store.store.sql import (
    INSERT_MESSAGE_SQL,
    INSERT_TURN_SQL,
    PARENT_BY_UID_SQL,
    PARENT_COLUMNS,
    SESSION_AND_LEAF_SQL,
    SESSION_AND_PARENT_SQL,
    TURN_COLUMNS,
)
from nexus_store.store.transfer import TransferMixin
from nexus_store.store.workspace import WorkspaceMixin
from nexus_store.tokens import DEFAULT_COUNTER, TokenCounter, get_counter, message_tokens

__all__ = ["ACTIVE_LEAF", "Store"]


class _ActiveLeaf:
    def __repr__(self) -> str:
        return "ACTIVE_LEAF"


ACTIVE_LEAF: Any = _ActiveLeaf()
"""Parent marker: append as a child of the session's active leaf (the default)."""

_BUSY_RETRY_SECONDS = 30.0

# Columns of the parent row read before an append (see PARENT_COLUMNS).
_P_ID, _P_SEQ, _P_DEPTH, _P_TOKENS, _P_PATH_TOKENS, _P_CTX_TOKENS = range(6)
_P_COMPACTION, _P_COUNT, _P_MODEL, _P_THINKING, _P_RUN_START, _P_RUN_PARENT, _P_KIND = range(6, 13)
_P_UID, _P_COMPACTION_UID = 13, 14


_clock: list[Any] = [-1, ""]  # (second, its "YYYY-MM-DDTHH:MM:SS." prefix): strftime is slow


def utc_now() -> str:
    """Now as ISO 8601 UTC with milliseconds, the way JavaScript's toISOString writes it."""
    now = time.time()
    second = int(now)
    if second != _clock[0]:
        _clock[0] = second
        _clock[1] = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
    return f"{_clock[1]}{int((now - second) * 1000):03d}Z"


def _unstorable(value: object) -> bool:
    """Whether a value is a string that cannot be a text column (see is_storable_text)."""
    return isinstance(value, str) and not is_storable_text(value)


def _is_busy(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


class Store(
    ReadingMixin,
    IngestMixin,
    TransferMixin,
    CompactionMixin,
    SearchMixin,
    WorkspaceMixin,
    MaintenanceMixin,
    CopyMixin,
):
    """A nexus_store database: sessions as trees of turns.

    Example:
        >>> with Store(memory=True, counter="chars4") as store:
        ...     s = store.create_session(cwd="/repo")
        ...     _ = store.append_message(s.id, {"role": "user", "content": "hi", "timestamp": 0})
        ...     store.context(s.id).messages
        [{'role': 'user', 'content': 'hi', 'timestamp': 0}]

    Args:
        path: Database file (created if missing), or a `sqlite_utils.Database`, or a
            ``postgresql://`` URL (a `PostgresStore` on a server).
        memory: Use a private in-memory database instead of a file.
        counter: Token counter: a name (``"cl100k_base"``, ``"chars4"``) or an object
            with ``name`` and ``count``. Default: the one the database was created with
            (cl100k_base for a new database).
        synchronous: ``"NORMAL"`` (default; durable against process crashes) or
            ``"FULL"`` (also against power loss).
        busy_timeout: Seconds to wait for another writer's lock, per attempt.

    Raises:
        StoreOpenError: If the path cannot be opened as a nexus_store database.
        SchemaOutOfDate: If the database was written by a newer nexus_store.
    """

    read_only: str | None = None
    """Why this store cannot write (a read-only file or folder), or None when it can."""

    def __new__(cls, path: Any = None, **options: Any) -> Store:
        """A ``postgresql://`` URL opens a `PostgresStore` (issue 8); anything else SQLite."""
        if cls is Store and is_postgres_url(path):
            from nexus_store.store.pgstore import PostgresStore

            return super().__new__(PostgresStore)
        return super().__new__(cls)

    def __init__(
        self,
        path: str | Path | sqlite_utils.Database | None = None,
        *,
        memory: bool = False,
        counter: str | TokenCounter | None = None,
        synchronous: str = "NORMAL",
        busy_timeout: float = 5.0,
    ) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL", "OFF", "EXTRA"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.filename: Path | None = None
        self.read_only = None
        created = False
        if isinstance(path, sqlite_utils.Database):
            self.db = path
            path.conn.isolation_level = None
        elif memory or path is None or str(path) == ":memory:":
            if path is None and not memory:
                raise ValueError("give a database path, or memory=True")
            self.db = sqlite_utils.Database(
                connection.connect(":memory:", timeout=busy_timeout), execute_plugins=False
            )
        else:
            self.filename = Path(path)
            if self.filename.exists():
                connection.check_existing(self.filename)
                self.read_only = connection.read_only_reason(self.filename)
            else:
                connection.create_private(self.filename)
                created = True
            if self.read_only:
                conn = connection.connect_read_only(self.filename, timeout=busy_timeout)
            else:
                conn = connection.connect(str(self.filename), timeout=busy_timeout)
            self.db = sqlite_utils.Database(conn, execute_plugins=False)
        self.conn: sqlite3.Connection = self.db.conn
        try:
            self._check_ours()  # before any pragma: refuse a foreign file untouched
            if self.filename is not None and not created:
                connection.warn_if_shared(self.filename)
            self._configure(synchronous.upper(), busy_timeout)
            self._migrate()
            self.counter = self._resolve_counter(counter)
        except BaseException:
            self.conn.close()
            if created and self.filename is not None:
                with contextlib.suppress(OSError):
                    self.filename.unlink()
            raise

    # -- opening -------------------------------------------------------------------

    def _configure(self, synchronous: str, busy_timeout: float) -> None:
        try:
            if self.filename is not None and not self.read_only:
                mode = self.conn.execute("pragma journal_mode=wal").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreOpenError(f"cannot switch {self.filename} to WAL mode (got {mode})")
            self.conn.execute(f"pragma synchronous={synchronous}")
            # Checkpoint every 1,000 WAL pages (about 4 MB, SQLite's default): committed
            # data waits at most that long in -wal before it is in the .db file, which
            # people copy as a backup (issue 18; 10,000 pages let ~40 MB live only in
            # -wal). A large WAL is truncated back to 16 MB after a checkpoint.
            # `nexus-store backup` makes a whole copy whatever the WAL holds.
            self.conn.execute("pragma wal_autocheckpoint=1000")
            self.conn.execute("pragma journal_size_limit=16777216")
            self.conn.execute("pragma foreign_keys=on")
            self.conn.execute(f"pragma busy_timeout={int(busy_timeout * 1000)}")
        except StorageError as err:
            raise StoreOpenError(str(err)) from None
        except sqlite3.DatabaseError as err:
            raise StoreOpenError(f"cannot open {self.filename}: {err}") from None

    def _check_ours(self) -> None:
        try:
            tables = {
                row[0]
                for row in self.conn.execute("select name from sqlite_master where type = 'table'")
            }
        except StorageError as err:  # a damaged file: the message says what to do
            raise StoreOpenError(str(err)) from None
        except sqlite3.DatabaseError as err:
            raise StoreOpenError(f"cannot read {self.filename}: {err}") from None
        if tables and not (tables & {"_sqlite_migrations", "sessions"}):
            raise StoreOpenError(
                f"{self.filename} is a SQLite database of another program (it has tables but no "
                "nexus_store schema); choose another path"
            )

    def _migrate(self) -> None:
        migrations = migrate.build_migrations()
        if self.read_only:
            migrate.refuse_pending(self.db, migrations, f"{self.read_only}; nothing was changed")
            return
        for attempt in range(100):
            try:
                migrate.ensure_current(self.db, migrations)
                return
            except sqlite3.OperationalError as err:
                if not _is_busy(err) or attempt == 99:
                    if "readonly" in str(err).lower():
                        raise StoreOpenError(f"cannot write {self.filename}: read-only") from None
                    raise
                time.sleep(0.05 + random.random() * 0.1)

    def _resolve_counter(self, counter: str | TokenCounter | None) -> TokenCounter:
        row = self.conn.execute("select value from settings where key = 'token_counter'").fetchone()
        recorded = row[0] if row else None
        chosen: TokenCounter
        if counter is None:
            chosen = get_counter(recorded or DEFAULT_COUNTER)
        elif isinstance(counter, str):
            chosen = get_counter(counter)
        else:
            chosen = counter
        if recorded is None and not self.read_only:
            with self.atomic():
                self.conn.execute(
                    "insert or ignore into settings (key, value) values ('token_counter', ?)",
                    [chosen.name],
                )
        elif recorded != chosen.name:
            raise NexusError(
                f"this database stores token counts made by {recorded!r}, not {chosen.name!r}; "
                f"open it with its own counter (counter={recorded!r}, or no --counter option) "
                "so that counts stay comparable"
            )
        return chosen

    def backup(self, dest: str | Path, *, force: bool = False) -> int:
        """Write a whole, consistent copy of the database to ``dest`` (0600; see store/backup.py).

        Returns:
            The backup's size in bytes.

        Raises:
            NexusError: If ``dest`` exists (without ``force``) or cannot be written, or
                the store is in memory.
        """
        return backup_sqlite(self.conn, dest, force=force)

    def close(self) -> None:
        """Close the database connection."""
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ----------------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Store]:
        """Run the block in one write transaction (a savepoint when nested).

        The outermost block takes the write lock at once (``BEGIN IMMEDIATE``), waiting
        and retrying with backoff while another process holds it.
        """
        if self.read_only:
            raise ReadOnlyError(
                f"cannot write to {self.filename}: {self.read_only}; reading works, nothing was "
                "changed"
            )
        if self.conn.in_transaction:
            # A fixed savepoint name keeps the statements in sqlite3's cache (appends
            # inside a caller's atomic() are the batched hot path); names may nest.
            self.conn.execute("savepoint nexus_nested")
            try:
                yield self
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("rollback to nexus_nested")
                    self.conn.execute("release nexus_nested")
                raise
            self.conn.execute("release nexus_nested")
            return
        deadline = time.monotonic() + _BUSY_RETRY_SECONDS
        delay = 0.005
        while True:
            try:
                self.conn.execute("begin immediate")
                break
            except sqlite3.OperationalError as err:
                if not _is_busy(err) or time.monotonic() > deadline:
                    raise NexusError(
                        f"the database is locked by another writer and stayed locked for "
                        f"{_BUSY_RETRY_SECONDS:.0f}s; try again"
                    ) from None
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.2)
        try:
            yield self
            self.conn.execute("commit")
        except BaseException as err:
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error, NexusError):
                    self.conn.execute("rollback")
            if is_driver_error(err):  # issue 18: no raw driver error reaches a caller
                raise translate(err, self._where()) from err
            raise

    def _where(self) -> str:
        """The database, as driver errors name it."""
        return str(self.filename) if self.filename is not None else "the in-memory database"

    # -- sessions --------------------------------------------------------------------

    def create_session(
        self,
        *,
        id: str | None = None,
        cwd: str | None = None,
        title: str | None = None,
        parent_session: str | None = None,
        fork_turn: str | None = None,
        created_utc: str | None = None,
    ) -> Session:
        """Create an empty session.

        Args:
            id: Public id (a new UUID when omitted).
            cwd: Working directory.
            title: Display name.
            parent_session: Id of the session this one forks from.
            fork_turn: Id of the parent session's turn the fork starts at.
            created_utc: Creation time (now when omitted).

        Returns:
            The new session.

        Raises:
            InvalidEntry: If the id is taken.
            SessionNotFound: If the parent session does not exist.
            TurnNotFound: If the fork turn is not in the parent session.
        """
        texts = (("id", id), ("cwd", cwd), ("title", title), ("created_utc", created_utc))
        for name, value in texts:
            if _unstorable(value):
                raise InvalidEntry(
                    f"create_session {name} {value!r} holds a lone surrogate or NUL (not text)"
                )
        uid = id if id is not None else str(uuid.uuid4())
        now = created_utc or utc_now()
        with self.atomic():
            parent_key = fork_key = None
            if parent_session is not None:
                parent_key = self._session_key(parent_session)
                if fork_turn is not None:
                    fork_key = self._turn_key(parent_key, parent_session, fork_turn)
            elif fork_turn is not None:
                raise InvalidEntry("fork_turn needs parent_session")
            try:
                self.conn.execute(
                    "insert into sessions (uid, cwd, title, created_utc, updated_utc, "
                    "parent_session_id, fork_turn_id) values (?, ?, ?, ?, ?, ?, ?)",
                    [uid, cwd, title, now, now, parent_key, fork_key],
                )
            except sqlite3.IntegrityError:
                raise InvalidEntry(f"a session with id {uid!r} already exists") from None
        return self.get_session(uid)

    def delete_session_if_empty(self, session_id: str) -> bool:
        """Remove a session that has no turns (a sub-agent spawn that never started).

        Returns:
            True if it was removed; False if it has turns (then nothing changes).

        Raises:
            SessionNotFound: If the session does not exist.
        """
        with self.atomic():
            key = self._session_key(session_id)
            if self.conn.execute(
                "select 1 from turns where session_id = ? limit 1", [key]
            ).fetchone():
                return False
            if self.conn.execute(
                "select 1 from sessions where parent_session_id = ? limit 1", [key]
            ).fetchone():
                return False
            self.conn.execute("delete from sessions where id = ?", [key])
        return True

    def set_title(self, session_id: str, title: str | None) -> Session:
        """Set a session's display name (stored on the session, not as a turn)."""
        if _unstorable(title):
            raise InvalidEntry(f"title {title!r} holds a lone surrogate or NUL (not text)")
        with self.atomic():
            key = self._session_key(session_id)
            self.conn.execute("update sessions set title = ? where id = ?", [title, key])
        return self.get_session(session_id)

    # -- appending ---------------------------------------------------------------------

    def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> Turn:
        """Append a pi v3 entry as a new turn and make it the active leaf.

        Args:
            session_id: The session.
            entry: ``{"type": ..., ...}``. ``"id"`` is optional (generated). Without a
                ``"parentId"`` key the turn is a child of the active leaf;
                ``"parentId": None`` makes a new root; a turn id makes a child of it
                (appending twice to one parent makes a branch).

        Returns:
            The new turn.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If ``parentId`` names no turn of this session.
            InvalidEntry: If the entry breaks the model's rules (no type, a message
                without a role, a compaction whose first kept turn is not an ancestor,
                a duplicated id, ...).
        """
        if not isinstance(entry, Mapping):
            raise InvalidEntry(f"an entry must be a dict, not {type(entry).__name__}")
        entry = dict(entry)
        _validate_native(entry)
        with self.atomic():
            explicit = "parentId" in entry and entry["parentId"] is not None
            if explicit and not isinstance(entry["parentId"], str):
                raise InvalidEntry(
                    f"parentId must be a turn id (a string) or None, not {entry['parentId']!r}"
                )
            if explicit and _unstorable(entry["parentId"]):
                # no stored id has a lone surrogate (it is not UTF-8): report, don't crash
                raise TurnNotFound(
                    f"no turn with id {entry['parentId']!r} in session {session_id!r} (parentId)"
                )
            self._lock_session(session_id)
            if explicit:
                row = self.conn.execute(
                    SESSION_AND_PARENT_SQL, [entry["parentId"], session_id]
                ).fetchone()
            else:
                row = self.conn.execute(SESSION_AND_LEAF_SQL, [session_id]).fetchone()
            if row is None:
                raise SessionNotFound(f"no session with id {session_id!r}")
            session_key, last_seq, fork_key = row[0], row[1], row[2]
            parent = None if row[3] is None or ("parentId" in entry and not explicit) else row[3:]
            if explicit and parent is None:
                raise TurnNotFound(
                    f"no turn with id {entry['parentId']!r} in session {session_id!r} (parentId)"
                )
            if parent is None and "parentId" not in entry:
                # refuse, never misroute to a new root (issue 18: a dangling active leaf)
                active = self._session_row(session_id)[1]
                if active is not None:
                    raise dangling(session_id, active)
            fork = None
            if parent is None and fork_key is not None:
                # A root of a forked session continues the parent session's path.
                fork = self._parent_row(fork_key)
            now = utc_now()
            if "timestamp" not in entry:
                entry["timestamp"] = now
            turn = self._insert_turn(
                session_key, session_id, parent, entry, native=True, seq=last_seq + 1, fork=fork
            )
            self.conn.execute(
                "update sessions set active_leaf_id = ?, updated_utc = ?, last_seq = ? "
                "where id = ?",
                [self._last_turn_key, now, turn.seq, session_key],
            )
        return turn

    def append_message(
        self, session_id: str, message: Mapping[str, Any], *, parent_id: Any = ACTIVE_LEAF
    ) -> Turn:
        """Append one agent message (a ``message`` turn).

        Args:
            session_id: The session.
            message: A pi agent message, e.g. ``{"role": "user", "content": "hi",
                "timestamp": 0}``.
            parent_id: ACTIVE_LEAF (default), None for a new root, or a turn id.

        Returns:
            The new turn.
        """
        return self.append_entry(
            session_id, _with_parent({"type": "message", "message": message}, parent_id)
        )

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        parent_id: Any = ACTIVE_LEAF,
    ) -> Turn:
        """Append a whole exchange as one turn carrying several messages, in order."""
        entry = {"type": "message", "messages": [dict(m) for m in messages]}
        return self.append_entry(session_id, _with_parent(entry, parent_id))

    def append_compaction(
        self,
        session_id: str,
        summary: str,
        first_kept_turn_id: str,
        tokens_before: int,
        *,
        parent_id: Any = ACTIVE_LEAF,
        **fields: Any,
    ) -> Turn:
        """Append a compaction turn (its first kept turn must be an ancestor).

        Extra keyword fields (``tokensAfter``, ``trigger``, ``layer``, ``details``,
        ``customInstruction``, ``messagesCompacted``) are stored on the entry.
        """
        entry = {
            "type": "compaction",
            "summary": summary,
            "firstKeptEntryId": first_kept_turn_id,
            "tokensBefore": tokens_before,
            **fields,
        }
        return self.append_entry(session_id, _with_parent(entry, parent_id))

    def append_branch_summary(
        self, session_id: str, from_id: str | None, summary: str, *, details: Any = None
    ) -> Turn:
        """Go back to ``from_id`` (None: before the first turn) with a summary of the branch left.

        As pi's ``branchWithSummary``: the summary turn becomes a child of ``from_id``
        and the new active leaf.
        """
        entry: dict[str, Any] = {
            "type": "branch_summary",
            "parentId": from_id,
            "fromId": from_id if from_id is not None else "root",
            "summary": summary,
        }
        if details is not None:
            entry["details"] = details
        return self.append_entry(session_id, entry)

    def set_label(self, session_id: str, target_id: str, label: str | None) -> Turn:
        """Set (or clear, with None or "") the label of a turn, as a ``label`` turn."""
        self.get_turn(session_id, target_id)
        entry: dict[str, Any] = {"type": "label", "targetId": target_id}
        if label is not None:
            entry["label"] = label
        return self.append_entry(session_id, entry)

    def navigate(self, session_id: str, turn_id: str | None) -> Session:
        """Move the active leaf to ``turn_id`` (None: before the first turn).

        The next append without an explicit parent continues from there; nothing is
        deleted.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If the turn is not in the session.
        """
        with self.atomic():
            session_key, _ = self._session_row(session_id)
            key = None if turn_id is None else self._turn_key(session_key, session_id, turn_id)
            self.conn.execute(
                "update sessions set active_leaf_id = ?, updated_utc = ? where id = ?",
                [key, utc_now(), session_key],
            )
        return self.get_session(session_id)

    # -- internals shared with importers -------------------------------------------------

    def _allocate_keys(self, count: int, floor: int) -> list[int]:
        """Keys for ``count`` new turns, each at least ``floor``, in increasing order.

        SQLite: the write lock is held (BEGIN IMMEDIATE), so keys past max(id) are ours.
        PostgreSQL overrides this with a block of the identity sequence.
        """
        top = int(self.conn.execute("select coalesce(max(id), 0) from turns").fetchone()[0])
        first = max(top + 1, floor)
        return list(range(first, first + count))

    def _lock_session(self, session_id: str) -> None:
        """Serialize appends to one session; SQLite's BEGIN IMMEDIATE already does."""

    def _session_row(self, session_id: str) -> tuple[int, int | None]:
        if _unstorable(session_id):
            raise SessionNotFound(f"no session with id {session_id!r} (not valid UTF-8)")
        row = self.conn.execute(
            "select id, active_leaf_id from sessions where uid = ?", [session_id]
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return row[0], row[1]

    def _session_key(self, session_id: str) -> int:
        return self._session_row(session_id)[0]

    def _turn_key(self, session_key: int, session_id: str, turn_id: str) -> int:
        if _unstorable(turn_id):
            raise TurnNotFound(f"no turn with id {turn_id!r} in session {session_id!r}")
        row = self.conn.execute(
            "select id from turns where session_id = ? and uid = ?", [session_key, turn_id]
        ).fetchone()
        if row is None:
            raise TurnNotFound(f"no turn with id {turn_id!r} in session {session_id!r}")
        return int(row[0])

    def _parent_row(self, key: int) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(
            f"select {PARENT_COLUMNS} from turns t left join turns pc on pc.id = t.compaction_id "
            "where t.id = ?",
            [key],
        ).fetchone()
        return row

    def _is_ancestor(self, ancestor: int, ancestor_depth: int, node: tuple[Any, ...]) -> bool:
        """Whether turn ``ancestor`` is ``node`` (a parent row) or one of its ancestors."""
        if node[_P_DEPTH] < ancestor_depth:
            return False
        row = self.conn.execute(
            "with recursive up(id, parent_id, depth) as ("
            " select id, parent_id, depth from turns where id = ?"
            " union all select t.id, t.parent_id, t.depth"
            " from up join turns t on t.id = up.parent_id"
            " where up.depth > ?) select id from up where depth = ?",
            [node[_P_ID], ancestor_depth, ancestor_depth],
        ).fetchone()
        return row is not None and row[0] == ancestor

    def _insert_turn(
        self,
        session_key: int,
        session_id: str,
        parent: tuple[Any, ...] | None,
        entry: dict[str, Any],
        *,
        native: bool,
        seq: int,
        patch: Mapping[str, Any] | None = None,
        fork: tuple[Any, ...] | None = None,
    ) -> Turn:
        """Insert one turn (and its messages) under ``parent`` as ``seq``; inside a transaction.

        ``fork``: for a root of a forked session, the parent session's fork turn, from
        which the root takes its path values (it stays a root of its own session).

        The caller updates the session's ``last_seq`` (and the active leaf).
        """
        kind, skip, message_dicts = turn_payload(entry)
        counts = [message_tokens(self.counter, m) for m in message_dicts]
        # A compaction points at itself (compaction_id), so its key is taken before the
        # insert; the write lock is held (BEGIN IMMEDIATE), so max(id) + 1 is ours.
        key: int | None = None
        if kind == "compaction":
            key = int(self.conn.execute("select coalesce(max(id), 0) + 1 from turns").fetchone()[0])
        uid = entry.get("id")
        generated = not isinstance(uid, str)
        if generated and "id" in entry and native:
            raise InvalidEntry(f"entry id must be a string, not {entry['id']!r}")
        values, child = self._turn_values(
            session_key,
            session_id,
            parent,
            entry,
            kind,
            skip,
            message_dicts,
            counts,
            seq=seq,
            key=key,
            uid=uid if isinstance(uid, str) else "",
            native=native,
            patch=patch,
            fork=fork,
        )
        for _attempt in range(100):
            if generated:
                values["uid"] = secrets.token_hex(4)
            try:
                cursor = self.conn.execute(INSERT_TURN_SQL, [values[c] for c in TURN_COLUMNS])
                break
            except sqlite3.IntegrityError as err:
                if "uid" not in str(err):
                    raise
                if not generated:
                    raise InvalidEntry(
                        f"a turn with id {uid!r} already exists in session {session_id!r}"
                    ) from None
        key = int(cursor.lastrowid or 0) if key is None else key
        rows = message_rows(key, message_dicts, counts)
        if rows:
            self.conn.executemany(INSERT_MESSAGE_SQL, rows)
        self._last_turn_key = key
        final = dict(entry)
        final["id"] = values["uid"]
        final["parentId"] = None if parent is None else parent[_P_UID]
        model_json = values["active_model_json"]
        return Turn.model_construct(
            id=values["uid"],
            session_id=session_id,
            parent_id=final["parentId"],
            kind=kind,
            seq=seq,
            timestamp=values["created_utc"],
            depth=values["depth"],
            tokens=values["tokens"],
            path_tokens=values["path_tokens"],
            context_tokens=values["context_tokens"],
            compactions=values["compaction_count"],
            compaction_id=child[_P_COMPACTION_UID],
            model=None if model_json is None else json.loads(model_json),
            thinking_level=values["active_thinking_level"],
            entry=final,
        )

    def _turn_values(
        self,
        session_key: int,
        session_id: str,
        parent: tuple[Any, ...] | None,
        entry: dict[str, Any],
        kind: str,
        skip: frozenset[str],
        message_dicts: list[dict[str, Any]],
        counts: list[int],
        *,
        seq: int,
        key: int | None,
        uid: str,
        native: bool,
        patch: Mapping[str, Any] | None,
        fork: tuple[Any, ...] | None = None,
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """The column values of a new turn, and its row as a parent of later turns.

        Path values come from the parent; a compaction's first kept turn is resolved
        (and, for native appends, must be an ancestor).
        """
        link = parent  # the parent_id link; path values may come from a fork turn instead
        if parent is None and fork is not None:
            parent = fork
        fields = encode_entry_fields(entry, skip)
        tokens = sum(counts)
        if kind in ("branch_summary", "compaction"):
            summary = entry.get("summary")
            if isinstance(summary, str) and summary:
                tokens = message_tokens(
                    self.counter, {"role": "compactionSummary", "summary": summary}
                )
        depth = 0 if parent is None else parent[_P_DEPTH] + 1
        path_tokens = 0 if parent is None else parent[_P_PATH_TOKENS]
        if link is not None and parent is not None and parent[_P_SEQ] == seq - 1:
            run_start, run_parent = parent[_P_RUN_START], parent[_P_RUN_PARENT]
        else:
            run_start, run_parent = seq, None if parent is None else parent[_P_ID]
        model_json = None if parent is None else parent[_P_MODEL]
        thinking = "off" if parent is None else parent[_P_THINKING]
        if kind == "model_change":
            model_json = dumps(
                {
                    k: entry[v]
                    for k, v in (("provider", "provider"), ("modelId", "modelId"))
                    if v in entry
                }
            )
        elif kind == "thinking_level_change":
            level = entry.get("thinkingLevel")
            thinking = level if isinstance(level, str) else None
        for message in message_dicts:
            if message.get("role") == "assistant":
                model_json = dumps(
                    {
                        k: message[v]
                        for k, v in (("provider", "provider"), ("modelId", "model"))
                        if v in message
                    }
                )
        first_kept_key = None
        if kind == "compaction":
            first_uid = entry.get("firstKeptEntryId")
            kept: tuple[Any, ...] | None = None
            if isinstance(first_uid, str):
                kept = self.conn.execute(PARENT_BY_UID_SQL, [session_key, first_uid]).fetchone()
            if (
                kept is not None
                and parent is not None
                and self._is_ancestor(kept[_P_ID], kept[_P_DEPTH], parent)
            ):
                first_kept_key = kept[_P_ID]
                own = 0 if kept[_P_KIND] == "compaction" else kept[_P_TOKENS]
                context_tokens = tokens + parent[_P_PATH_TOKENS] - kept[_P_PATH_TOKENS] + own
            elif native:
                # (a compaction naming itself is no ancestor either: issue 18; an import
                # keeps what a transcript wrote, where it keeps nothing before it)
                raise InvalidEntry(
                    f"compaction firstKeptEntryId {first_uid!r} is not an ancestor of the new "
                    f"compaction in session {session_id!r}; keep a turn on the path to its parent"
                )
            else:
                context_tokens = tokens
            compaction_count = 1 + (0 if parent is None else parent[_P_COUNT])
            compaction_key = key
        else:
            path_tokens += tokens
            context_tokens = tokens + (0 if parent is None else parent[_P_CTX_TOKENS])
            compaction_count = 0 if parent is None else parent[_P_COUNT]
            compaction_key = None if parent is None else parent[_P_COMPACTION]
        values: dict[str, Any] = dict.fromkeys(TURN_COLUMNS)
        values.update(fields)
        values.update(
            id=key,
            session_id=session_key,
            uid=uid,
            parent_id=None if link is None else link[_P_ID],
            seq=seq,
            kind=kind,
            depth=depth,
            tokens=tokens,
            path_tokens=path_tokens,
            context_tokens=context_tokens,
            compaction_id=compaction_key,
            compaction_count=compaction_count,
            active_model_json=model_json,
            active_thinking_level=thinking,
            run_start_seq=run_start,
            run_parent_id=run_parent,
            first_kept_turn_id=first_kept_key,
            source_patch_json=dumps(patch) if patch else None,
        )
        compaction_uid = (
            uid if kind == "compaction" else (None if parent is None else parent[_P_COMPACTION_UID])
        )
        child = (
            key,
            seq,
            depth,
            tokens,
            path_tokens,
            context_tokens,
            compaction_key,
            compaction_count,
            model_json,
            thinking,
            run_start,
            run_parent,
            kind,
            uid,
            compaction_uid,
        )
        return values, child


def _with_parent(entry: dict[str, Any], parent_id: Any) -> dict[str, Any]:
    if parent_id is not ACTIVE_LEAF:
        entry["parentId"] = parent_id
    return entry


def _validate_native(entry: dict[str, Any]) -> None:
    for key, value in entry.items():
        # Entries are JSON: refuse what JSON cannot hold here, not as a TypeError later.
        try:
            # (no NaN or Infinity: JSON has none, and JavaScript writes them as null)
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as err:
            raise InvalidEntry(f"entry field {key!r} is not JSON: {err}") from None
        if not isinstance(key, str) or _unstorable(key):
            raise InvalidEntry(f"entry keys must be text, not {key!r}")
    if _unstorable(entry.get("id")):
        raise InvalidEntry(f"entry id {entry['id']!r} holds a lone surrogate or NUL (not text)")
    kind = entry.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidEntry(
            f"an entry needs a 'type' string (message, compaction, ...), got {kind!r}"
        )
    if kind == "session":
        raise InvalidEntry("'session' is a transcript header, not an entry; use create_session()")
    if kind == "message":
        if "message" in entry:
            message = entry["message"]
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise InvalidEntry("a message entry needs 'message': a dict with a 'role' string")
        elif "messages" in entry:
            messages = entry["messages"]
            if (
                not isinstance(messages, list)
                or not messages
                or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
            ):
                raise InvalidEntry(
                    "'messages' must be a non-empty list of dicts with a 'role' string"
                )
        else:
            raise InvalidEntry("a message entry needs a 'message' dict")
    elif kind == "compaction":
        if not isinstance(entry.get("summary"), str):
            raise InvalidEntry("a compaction entry needs a 'summary' string")
        if not isinstance(entry.get("firstKeptEntryId"), str):
            raise InvalidEntry(
                "a compaction entry needs 'firstKeptEntryId': the id of an ancestor turn"
            )
    elif kind == "label" and not isinstance(entry.get("targetId"), str):
        raise InvalidEntry("a label entry needs a 'targetId' string")
