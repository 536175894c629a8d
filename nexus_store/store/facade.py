"""`Store`: the one door to the database, a thin facade over parts (issue 14).

A `Store` opens (or creates and migrates) one database through its backend's
`Dialect` and keeps one `Handle` (connection, dialect, token counter,
transactions, key lookups). The work lives in parts that each take the handle:
`Reading`, `Sessions`, `Appends`, `Ingest`, `Importer`, `Export`, `Search`,
`Workspace`, `Doctor`, `Gc`, `Copy` and `Backup`; `Compaction` sits above them and
uses only the `Store` API. Every public method here is one line that calls a part,
documented by the part method's docstring (copied onto it: ``help(Store.append_entry)``
shows it). See docs/architecture.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from nexus_store.store.connection import DEFAULT_WAL_LIMIT
from nexus_store.store.dialect import PostgresDialect
from nexus_store.store.facade_docs import PartDocs, document_from_parts
from nexus_store.store.leaves import ACTIVE_LEAF
from nexus_store.store.opening import open_handle
from nexus_store.store.parts import make_part, part_classes
from nexus_store.store.urls import is_postgres_url, redact

if TYPE_CHECKING:
    import sqlite_utils

    from nexus_store.compaction.plan import ContextItem
    from nexus_store.compaction.policy import CompactionConfig
    from nexus_store.compaction.prune import PruneConfig, PruneResult
    from nexus_store.compaction.runner import Compaction, CompactResult
    from nexus_store.compaction.summarizer import Summarizer
    from nexus_store.models import Context, ContextStatus, Session, Turn
    from nexus_store.store.appends import Appends
    from nexus_store.store.backup import Backup
    from nexus_store.store.copy import Copy, CopyProgress, CopyReport
    from nexus_store.store.dialect import Capabilities, Dialect
    from nexus_store.store.doctor import Doctor, DoctorReport
    from nexus_store.store.export import Export
    from nexus_store.store.gc import Gc, GcReport
    from nexus_store.store.gc_batches import GcProgress
    from nexus_store.store.importing import Importer, ImportReport, ProgressCallback
    from nexus_store.store.ingest import Ingest, IngestCounts, ProblemSink
    from nexus_store.store.reading import Reading
    from nexus_store.store.search import Search, SearchHit
    from nexus_store.store.sessions import Sessions
    from nexus_store.store.workspace import Workspace
    from nexus_store.tokens import TokenCounter
    from nexus_store.workspace import WorkspaceFile

__all__ = ["ACTIVE_LEAF", "PostgresStore", "Store"]


class Store(metaclass=PartDocs):
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

    Attributes:
        conn: The connection (`sqlite3.Connection`, or the PostgreSQL adapter).
        db: The `sqlite_utils.Database` (SQLite only; None on PostgreSQL).
        filename: The database file (None in memory or on a server).
        counter: The token counter.
        handle: The `Handle` the parts share.
        read_only: Why this store cannot write (a read-only file or folder), or None.

    Raises:
        StoreOpenError: If the path cannot be opened as a nexus_store database.
        SchemaOutOfDate: If the database was written by a newer nexus_store.
        CounterMismatch: If ``counter`` is not the one the database was created with.
    """

    def __new__(cls, path: Any = None, **options: Any) -> Store:
        """A ``postgresql://`` URL opens a `PostgresStore` (issue 8); anything else SQLite."""
        if cls is Store and is_postgres_url(path):
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
        handle = open_handle(
            path, memory=memory, counter=counter, synchronous=synchronous, busy_timeout=busy_timeout
        )
        self.handle = handle
        self.filename: Path | None = handle.filename
        self.read_only: str | None = handle.read_only
        """Why this store cannot write (a read-only file or folder), or None when it can."""

    # The parts, each made when first used (store/parts.py): a command imports only its own.
    _reading: Reading
    _sessions: Sessions
    _appends: Appends
    _searcher: Search
    _ingester: Ingest
    _importer: Importer
    _exporter: Export
    _workspaces: Workspace
    _doctoring: Doctor
    _collector: Gc
    _copier: Copy
    _compaction: Compaction
    _backup: Backup

    if not TYPE_CHECKING:  # mypy checks the parts named above, not any name

        def __getattr__(self, name: str) -> Any:
            part = self.__dict__[name] = make_part(self, name)
            return part

    @property
    def db(self) -> sqlite_utils.Database | None:
        """The `sqlite_utils.Database` (SQLite only; None on PostgreSQL), made on first use."""
        return self.handle.sqlite_db

    @property
    def conn(self) -> Any:
        """The driver's connection (what the store's appends left pending is written first)."""
        return self.handle.conn

    @property
    def counter(self) -> TokenCounter:
        """The token counter (a copy into an empty store may give it the source's)."""
        return self.handle.counter

    @property
    def capabilities(self) -> Capabilities:
        """What this backend offers beyond the common API (`Capabilities`); ask first."""
        return self.handle.dialect.capabilities

    @property
    def dialect(self) -> Dialect:
        """The backend's `Dialect`."""
        return self.handle.dialect

    def close(self) -> None:
        """Close the database connection."""
        self.handle.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def atomic(self) -> Iterator[Store]:
        """Run the block in one write transaction (a savepoint when nested).

        The outermost block takes the write lock at once on SQLite (``BEGIN
        IMMEDIATE``), waiting and retrying with backoff while another process holds
        it (then `DatabaseBusy`); on PostgreSQL, appends lock their session's row.
        """
        with self.handle.atomic():
            yield self

    def applied_migrations(self) -> list[str]:
        """Names of the migrations recorded in the database, in order."""
        return self.handle.dialect.applied_migrations(self.handle)

    def analyze(self) -> None:
        """Refresh the planner's statistics of the store's tables (`copy_to` calls it)."""
        self.handle.dialect.analyze(self.handle)

    def find_session(self, session_id: str) -> Session | None:
        """Return the session with this id, or None."""
        return self._reading.find_session(session_id)

    def get_session(self, session_id: str) -> Session:
        """Return the session with this id."""
        return self._reading.get_session(session_id)

    def iter_sessions(self) -> Iterator[Session]:
        """Yield every session, most recently updated first."""
        return self._reading.iter_sessions()

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """Return sessions, most recently updated first (at most ``limit``)."""
        return self._reading.list_sessions(limit=limit)

    def resolve_session(self, ref: str) -> Session:
        """Find a session by id, unique id prefix, or ``latest`` (most recently updated)."""
        return self._reading.resolve_session(ref)

    def find_turn(self, session_id: str, turn_id: str) -> Turn | None:
        """Return a turn of the session, or None."""
        return self._reading.find_turn(session_id, turn_id)

    def get_turn(self, session_id: str, turn_id: str) -> Turn:
        """Return a turn of the session."""
        return self._reading.get_turn(session_id, turn_id)

    def iter_turns(self, session_id: str, *, batch: int = 1000) -> Iterator[Turn]:
        """Yield every turn of the session in append order, a batch at a time."""
        return self._reading.iter_turns(session_id, batch=batch)

    def children(self, session_id: str, turn_id: str | None) -> list[Turn]:
        """Return the children of a turn (roots for None), in append order."""
        return self._reading.children(session_id, turn_id)

    def leaves(self, session_id: str) -> list[Turn]:
        """Return the turns without children (the tips of every branch), in append order."""
        return self._reading.leaves(session_id)

    def path(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """Return the turns from the root to a leaf (default: the active leaf), root first."""
        return self._reading.path(session_id, leaf_id)

    def common_ancestor(self, session_id: str, a: str, b: str) -> Turn | None:
        """Return the deepest turn on the paths to both ``a`` and ``b`` (None if none)."""
        return self._reading.common_ancestor(session_id, a, b)

    def labels(self, session_id: str) -> dict[str, str]:
        """Return each labelled turn's current label (pi: the latest label entry wins)."""
        return self._reading.labels(session_id)

    def context(self, session_id: str, leaf_id: str | None = None) -> Context:
        """Assemble the context of a leaf (default: the active leaf) with pi's semantics."""
        return self._reading.context(session_id, leaf_id)

    def status(
        self,
        session_id: str,
        leaf_id: str | None = None,
        *,
        window: int | None = None,
        config: CompactionConfig | None = None,
    ) -> ContextStatus:
        """How full a leaf's context is and how often its path was compacted, in O(1)."""
        return self._reading.status(session_id, leaf_id, window=window, config=config)

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
        """Create an empty session."""
        return self._sessions.create_session(
            id=id,
            cwd=cwd,
            title=title,
            parent_session=parent_session,
            fork_turn=fork_turn,
            created_utc=created_utc,
        )

    def delete_session_if_empty(self, session_id: str) -> bool:
        """Remove a session that has no turns (a sub-agent spawn that never started)."""
        return self._sessions.delete_session_if_empty(session_id)

    def set_title(self, session_id: str, title: str | None) -> Session:
        """Set a session's display name (stored on the session, not as a turn)."""
        return self._sessions.set_title(session_id, title)

    def navigate(self, session_id: str, turn_id: str | None) -> Session:
        """Move the active leaf to ``turn_id`` (None: before the first turn)."""
        return self._sessions.navigate(session_id, turn_id)

    def should_flush(self, session_id: str, leaf_id: str | None = None) -> bool:
        """Whether the pre-compaction memory flush is due in the leaf's compaction epoch."""
        return self._compaction.should_flush(session_id, leaf_id)

    def record_flush(self, session_id: str, leaf_id: str | None = None) -> int:
        """Record that the flush ran in the leaf's current epoch; return that epoch."""
        return self._compaction.record_flush(session_id, leaf_id)

    def set_flush_epoch(self, session_id: str, epoch: int | None) -> None:
        """Store the compaction epoch in which the memory flush last ran (None: never)."""
        self._sessions.set_flush_epoch(session_id, epoch)

    def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> Turn:
        """Append a pi v3 entry as a new turn and make it the active leaf."""
        return self._appends.append_entry(session_id, entry)

    def append_message(
        self, session_id: str, message: Mapping[str, Any], *, parent_id: Any = ACTIVE_LEAF
    ) -> Turn:
        """Append one agent message (a ``message`` turn)."""
        return self._appends.append_message(session_id, message, parent_id=parent_id)

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        parent_id: Any = ACTIVE_LEAF,
    ) -> Turn:
        """Append a whole exchange as one turn carrying several messages, in order."""
        return self._appends.append_messages(session_id, messages, parent_id=parent_id)

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
        """Append a compaction turn (its first kept turn must be an ancestor)."""
        return self._appends.append_compaction(
            session_id, summary, first_kept_turn_id, tokens_before, parent_id=parent_id, **fields
        )

    def append_branch_summary(
        self, session_id: str, from_id: str | None, summary: str, *, details: Any = None
    ) -> Turn:
        """Go back to ``from_id`` with a summary of the branch left."""
        return self._appends.append_branch_summary(session_id, from_id, summary, details=details)

    def set_label(self, session_id: str, target_id: str, label: str | None) -> Turn:
        """Set (or clear, with None or "") the label of a turn, as a ``label`` turn."""
        return self._appends.set_label(session_id, target_id, label)

    def ingest(
        self,
        header: Mapping[str, Any],
        entries: Iterable[tuple[int, dict[str, Any], Mapping[str, Any] | None]],
        *,
        source_format: str,
        source_id: str,
        source_path: str | None = None,
        source_version: int | None = None,
        parent_source_id: str | None = None,
        on_problem: ProblemSink | None = None,
        strict: bool = False,
    ) -> tuple[str, IngestCounts]:
        """Store a transcript's session and entries in one transaction."""
        return self._ingester.ingest(
            header,
            entries,
            source_format=source_format,
            source_id=source_id,
            source_path=source_path,
            source_version=source_version,
            parent_source_id=parent_source_id,
            on_problem=on_problem,
            strict=strict,
        )

    def import_jsonl(
        self, path: str | Path, *, format: str | None = None, strict: bool = False
    ) -> list[str]:
        """Import one transcript file (or every transcript under a directory)."""
        return self._importer.import_jsonl(path, format=format, strict=strict)

    def import_paths(
        self,
        paths: list[str | Path],
        *,
        format: str | None = None,
        strict: bool = False,
        progress: ProgressCallback | None = None,
        stdin: IO[bytes] | None = None,
    ) -> ImportReport:
        """Import files, directories and ``-`` (standard input); report what happened."""
        return self._importer.import_paths(
            paths, format=format, strict=strict, progress=progress, stdin=stdin
        )

    def iter_export_entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the session's entries as the source wrote them (patches applied)."""
        return self._exporter.iter_export_entries(session_id, leaf_id)

    def export_header(self, session_id: str) -> dict[str, Any]:
        """The session header line for export (pi v3)."""
        return self._exporter.export_header(session_id)

    def backup_session(self, session_id: str) -> dict[str, Any]:
        """A JSON backup of one session from which `restore_session` rebuilds it identically."""
        return self._exporter.backup_session(session_id)

    def restore_session(self, backup: dict[str, Any]) -> str:
        """Rebuild a session from `backup_session` output: same ids, tree and active leaf."""
        return self._exporter.restore_session(backup)

    def export_jsonl(
        self,
        session_id: str,
        out: str | Path | IO[str],
        *,
        leaf_id: str | None = None,
        format: str = "pi",
    ) -> int:
        """Write a session as JSONL the source tool loads."""
        return self._exporter.export_jsonl(session_id, out, leaf_id=leaf_id, format=format)

    def search(
        self,
        query: str,
        *,
        session: str | None = None,
        role: str | None = None,
        tool: str | None = None,
        limit: int = 20,
        literal: bool = False,
        markers: tuple[str, str] = ("[", "]"),
        snippet_tokens: int = 16,
    ) -> list[SearchHit]:
        """Search message text and compaction/branch summaries, best match first."""
        return self._searcher.search(
            query,
            session=session,
            role=role,
            tool=tool,
            limit=limit,
            literal=literal,
            markers=markers,
            snippet_tokens=snippet_tokens,
        )

    def record_workspace(
        self, session_id: str, files: Sequence[WorkspaceFile], *, loaded_utc: str | None = None
    ) -> int:
        """Record the bootstrap files injected into a session's system prompt."""
        return self._workspaces.record_workspace(session_id, files, loaded_utc=loaded_utc)

    def workspace(self, session_id: str, *, load: int | None = None) -> list[WorkspaceFile]:
        """Return the bootstrap files recorded for a session, in prompt order."""
        return self._workspaces.workspace(session_id, load=load)

    def iter_workspace_loads(self, session_id: str) -> Iterator[tuple[int, str]]:
        """Yield ``(load number, loaded_utc)`` for each recorded load, oldest first."""
        return self._workspaces.iter_workspace_loads(session_id)

    def doctor(self, *, fix: bool = False, wal_limit: int = DEFAULT_WAL_LIMIT) -> DoctorReport:
        """Check the database and, with ``fix=True``, repair what is safe to repair."""
        return self._doctoring.doctor(fix=fix, wal_limit=wal_limit)

    def gc(
        self,
        session_id: str | None = None,
        *,
        all_sessions: bool = False,
        dead_branches_older_than: float | None = None,
        compacted_older_than: float | None = None,
        sessions_older_than: float | None = None,
        keep: Iterable[str] = (),
        dry_run: bool = False,
        vacuum: bool = True,
        now: datetime | None = None,
        batch_size: int = 1000,
        progress: GcProgress | None = None,
    ) -> GcReport:
        """Remove old dead branches, turns behind compactions and sessions, then reclaim space."""
        return self._collector.gc(
            session_id,
            all_sessions=all_sessions,
            dead_branches_older_than=dead_branches_older_than,
            compacted_older_than=compacted_older_than,
            sessions_older_than=sessions_older_than,
            keep=keep,
            dry_run=dry_run,
            vacuum=vacuum,
            now=now,
            batch_size=batch_size,
            progress=progress,
        )

    def backup(self, dest: str | Path, *, force: bool = False) -> int:
        """Write a whole, consistent copy of the database to ``dest`` (0600; SQLite only)."""
        return self._backup.backup(dest, force=force)

    def copy_to(
        self,
        other: Store,
        *,
        session_ids: Sequence[str] | None = None,
        progress: CopyProgress | None = None,
    ) -> CopyReport:
        """Copy every session (or those named) with its whole tree into another store."""
        return self._copier.copy_to(other._copier, session_ids=session_ids, progress=progress)

    def context_items(self, session_id: str, leaf_id: str | None = None) -> list[ContextItem]:
        """The leaf's context as planning items (turn id, kind, message, tokens)."""
        return self._compaction.context_items(session_id, leaf_id)

    def compact(
        self,
        session_id: str,
        *,
        leaf_id: str | None = None,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        keep_recent_tokens: int | None = None,
        instructions: str | None = None,
        trigger: Literal["manual", "auto"] = "manual",
        layer: Literal["prune", "summarize", "full"] = "summarize",
        dry_run: bool = False,
    ) -> CompactResult:
        """Summarize the older part of a leaf's context into a new compaction turn."""
        return self._compaction.compact(
            session_id,
            leaf_id=leaf_id,
            summarizer=summarizer,
            config=config,
            keep_recent_tokens=keep_recent_tokens,
            instructions=instructions,
            trigger=trigger,
            layer=layer,
            dry_run=dry_run,
        )

    def navigate_with_summary(
        self,
        session_id: str,
        turn_id: str | None,
        *,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        instructions: str | None = None,
    ) -> Turn | None:
        """Move the active leaf to ``turn_id``, summarizing the branch being left."""
        return self._compaction.navigate_with_summary(
            session_id, turn_id, summarizer=summarizer, config=config, instructions=instructions
        )

    def pruned_context(
        self, session_id: str, leaf_id: str | None = None, config: PruneConfig | None = None
    ) -> tuple[Context, PruneResult]:
        """The leaf's context with old tool outputs pruned (a view; nothing is written)."""
        return self._compaction.pruned_context(session_id, leaf_id, config)

    def compaction_history(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """The compactions on the path to a leaf, oldest first."""
        return self._compaction.compaction_history(session_id, leaf_id)


class PostgresStore(Store):
    """A nexus_store database on a PostgreSQL server (see `Store` for the API).

    ``Store("postgresql://...")`` returns one of these: the same facade and parts
    over a `PostgresDialect` handle; nothing is overridden.

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

    @property
    def url(self) -> str:
        """The server URL (with its password; `repr` hides it)."""
        dialect = self.handle.dialect
        assert isinstance(dialect, PostgresDialect)  # a PostgresStore's handle always is
        return dialect.url

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"


document_from_parts(Store, part_classes)
