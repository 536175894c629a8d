"""Storing entries that come from a transcript: idempotent, repairing, atomic per file.

Importers (nexus_store.formats) parse a file into a header and pi v3 entries in
file order; this module stores them. Unlike a native append, imported data keeps
what it says: a compaction whose first kept entry is not an ancestor is stored as
written (assembly then keeps nothing before it, as pi does). Links are repaired the
way pi reads them and each repair is reported: a parent that is not (yet) in the
session makes a root (so a cycle is broken where it closes), a self-parent makes a
root, a second entry with an id already used in the file is skipped (the first
wins). Re-importing is keyed on the source ids: an entry already stored with the
same content is skipped, one with different content is a conflict and is never
overwritten.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nexus_store.errors import ConflictError, InvalidEntry
from nexus_store.rows import dumps, is_storable_text, message_rows
from nexus_store.store import appends, compressed
from nexus_store.store.batches import BATCH, Item, Payload, prepared_batches
from nexus_store.store.db import Handle, utc_now
from nexus_store.store.indexqueue import queue_messages
from nexus_store.store.pathvalues import PathRow
from nexus_store.store.reading import Reading
from nexus_store.store.sql import INSERT_MESSAGE_SQL, PARENT_BY_UID_SQL, TURN_COLUMNS

__all__ = ["Ingest", "IngestCounts", "ProblemSink"]

ProblemSink = Callable[[int, str, str, bool], None]
"""Called as sink(line, kind, message, repaired) for each problem found while storing."""


class IngestCounts:
    """What one ingest did."""

    __slots__ = ("conflicts", "entries", "messages", "repaired", "skipped", "turns")

    def __init__(self) -> None:
        self.entries = 0
        self.turns = 0
        self.messages = 0
        self.skipped = 0
        self.repaired = 0
        self.conflicts = 0


def _same(stored: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
    a = {k: v for k, v in stored.items() if k != "parentId"}
    b = {k: v for k, v in incoming.items() if k != "parentId"}
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Ingest:
    """Storing a transcript's entries (``Store.ingest``; importers and copies call it).

    Args:
        db: The database handle.
        reading: The reading part (a re-imported entry is compared with the stored one).
    """

    def __init__(self, db: Handle, reading: Reading) -> None:
        self.db = db
        self.reading = reading

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
        """Store a transcript's session and entries in one transaction.

        Args:
            header: The session header (``{"type": "session", "id", "timestamp",
                "cwd", ...}``); fields without a column are kept for export.
            entries: ``(line, entry, patch)`` in file order; ``patch`` records how the
                source line differs from ``entry`` (for line-exact export).
            source_format: Format name (pi, ndjson, claude_code, codex).
            source_id: The transcript's session id: the idempotence key.
            source_path: File the entries come from.
            source_version: Format version.
            parent_source_id: source_id of the session this one is a sub-agent of.
            on_problem: Receives each repair or skip.
            strict: Raise ConflictError at the first problem instead of repairing.

        Returns:
            ``(session_id, counts)``.

        Raises:
            ConflictError: In strict mode, at the first repair, skip or conflict.
        """
        counts = IngestCounts()
        if not is_storable_text(source_id):
            raise InvalidEntry(
                f"transcript session id {source_id!r} holds a lone surrogate or NUL (not text)"
            )
        if source_path is not None and not is_storable_text(source_path):
            source_path = source_path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

        def problem(line: int, kind: str, message: str, repaired: bool) -> None:
            if strict:
                where = f"{source_path}:{line}: " if source_path else f"line {line}: "
                raise ConflictError(where + message)
            if repaired:
                counts.repaired += 1
            else:
                counts.skipped += 1
            if on_problem is not None:
                on_problem(line, kind, message, repaired)

        with self.db.atomic():
            session_key, session_id = self.ensure_imported_session(
                header, source_format, source_id, source_path, source_version, parent_source_id
            )
            self.db.lock_session(session_id)
            run = _Run(self, session_key, session_id, counts, problem)
            for prepared in prepared_batches(entries, self.db.counter):
                run.process(*prepared)
            run.finish()
            if run.added:
                # An export of a session whose active leaf was not its last entry names
                # the leaf in its header (issue 15); pi ignores the key.
                leaf = active_leaf_of(header)
                if leaf is not None:
                    self.db.execute(SET_DECLARED_LEAF_SQL, [session_key, leaf, session_key])
        return session_id, counts

    def write_entries(
        self,
        session_key: int,
        session_id: str,
        entries: Iterable[Item],
        problem: ProblemSink,
    ) -> tuple[IngestCounts, int]:
        """Append entries to a session with the importer's batched writer (in a transaction).

        Copies use it so that a copied turn is written as an imported one. The
        session's last seq and active leaf are left to the caller.

        Returns:
            What was written, and the seq of the last turn written.
        """
        counts = IngestCounts()
        run = _Run(self, session_key, session_id, counts, problem)
        for prepared in prepared_batches(entries, self.db.counter):
            run.process(*prepared)
        run.complete()
        return counts, run.last_seq

    def ensure_imported_session(
        self,
        header: Mapping[str, Any],
        source_format: str,
        source_id: str,
        source_path: str | None,
        source_version: int | None,
        parent_source_id: str | None,
    ) -> tuple[int, str]:
        """The key and id of the session a transcript goes into, created if new."""
        row = self.db.execute(
            "select id, uid from sessions where source_format = ? and source_id = ?",
            [source_format, source_id],
        ).fetchone()
        if row is not None:
            return int(row[0]), str(row[1])
        uid = source_id
        if self.db.execute("select 1 from sessions where uid = ?", [uid]).fetchone():
            uid = f"{source_id}-{source_format}"
        n = 1
        while self.db.execute("select 1 from sessions where uid = ?", [uid]).fetchone():
            n += 1
            uid = f"{source_id}-{source_format}-{n}"
        parent_key = None
        if parent_source_id is not None:
            parent = self.db.execute(
                "select id from sessions where source_id = ? order by id limit 1",
                [parent_source_id],
            ).fetchone()
            parent_key = None if parent is None else parent[0]
        created = header.get("timestamp") if isinstance(header.get("timestamp"), str) else _now()
        if not (isinstance(created, str) and is_storable_text(created)):
            created = _now()  # the header's own timestamp stays in header_json
        cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else None
        if cwd is not None and not is_storable_text(cwd):
            cwd = None
        rest = {k: v for k, v in header.items() if k != "cwd" or cwd is None}
        key = self.db.dialect.insert_key(
            self.db,
            "insert into sessions (uid, cwd, created_utc, updated_utc, parent_session_id, "
            "source_format, source_path, source_id, source_version, header_json) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                uid,
                cwd,
                created,
                created,  # the import sets it to the newest turn's time
                parent_key,
                source_format,
                source_path,
                source_id,
                source_version,
                dumps(rest),
            ],
        )
        return key, uid


HEADER_KEY = "nexusStore"
"""The header key an export writes the active leaf under: ``{"activeLeafId": ...}``."""

# Point the session at the turn its header names, when the session has it.
SET_DECLARED_LEAF_SQL = """
update sessions set active_leaf_id = coalesce(
    (select id from turns where session_id = ? and uid = ?), active_leaf_id)
where id = ?
"""


def active_leaf_of(header: Mapping[str, Any]) -> str | None:
    """The active leaf a header declares (``{"nexusStore": {"activeLeafId": ...}}``), or None."""
    ours = header.get(HEADER_KEY)
    leaf = ours.get("activeLeafId") if isinstance(ours, dict) else None
    return leaf if isinstance(leaf, str) and is_storable_text(leaf) else None


_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")  # a timestamp that sorts as text
_CACHE = 10_000

_LOOKUP = 500
# Which of a batch's ids are stored already: one query per batch (padded with NULLs,
# which match nothing) instead of one per entry.
_STORED_SQL = (
    "select uid, id, seq from turns where session_id = ? and uid in ("
    + ", ".join(["?"] * _LOOKUP)
    + ")"
)


class _SeenIds:
    """The ids stored by one run, as a Bloom filter of fixed size (2 MiB, two probes).

    "Not seen" is certain; "seen" may be wrong (measured: 1 in 3,000 at 150,000 ids,
    1 in 77 at a million) and is then settled by the database. Memory stays the same
    whatever the length of the file, unlike a set of the ids.
    """

    __slots__ = ("bits",)

    _MASK = (1 << 24) - 1

    def __init__(self) -> None:
        self.bits = bytearray(1 << 21)

    def add(self, uid: str) -> None:
        h = hash(uid)
        a, b = h & self._MASK, (h >> 24) & self._MASK
        self.bits[a >> 3] |= 1 << (a & 7)
        self.bits[b >> 3] |= 1 << (b & 7)

    def __contains__(self, uid: str) -> bool:
        h = hash(uid)
        a, b = h & self._MASK, (h >> 24) & self._MASK
        return bool(self.bits[a >> 3] & (1 << (a & 7))) and bool(self.bits[b >> 3] & (1 << (b & 7)))


class _Run:
    """One ingest: batches of entries counted together and inserted with executemany.

    Path values need each parent's row: the rows of recent turns are kept in a
    bounded cache (a conversation's parent is almost always a recent turn); a miss
    flushes the pending rows and asks the database. Keys are assigned here (the
    write lock is held for the whole file). Memory stays bounded by the cache.
    """

    def __init__(
        self,
        part: Ingest,
        session_key: int,
        session_id: str,
        counts: IngestCounts,
        problem: Callable[[int, str, str, bool], None],
    ) -> None:
        self.part = part
        self.db = part.db
        self.session_key = session_key
        self.session_id = session_id
        self.counts = counts
        self.problem = problem
        # Keys come in blocks from the store (SQLite: past max(id) under the write lock;
        # PostgreSQL: the identity sequence). Keys only grow, so a turn at or past the
        # run's first key was stored by this run.
        self._keys: list[int] = []
        self._last_key_given = 0
        self.run_start = self._next_key()
        self._keys.append(self.run_start)  # given back: the first turn takes it
        self.last_seq = int(
            self.db.execute("select last_seq from sessions where id = ?", [session_key]).fetchone()[
                0
            ]
        )
        # Roots of a forked session take their path values from the fork turn (as
        # native appends do): a copied fork keeps its inherited context.
        fork_key = self.db.execute(
            "select fork_turn_id from sessions where id = ?", [session_key]
        ).fetchone()[0]
        self.fork: PathRow | None = None if fork_key is None else self.db.parent_row(int(fork_key))
        # Ids are checked against the database when the session had turns before this
        # run (a re-import), or once the cache has forgotten some of this run's turns.
        self.check_db = self.last_seq >= 0
        # A session new in this run holds only this run's turns: an id the filter has
        # never seen is new, with no database lookup (only a "maybe" is looked up).
        self.fresh = self.last_seq < 0
        self.seen = _SeenIds()
        self.max_matched_seq = -1
        self.cache: OrderedDict[str, PathRow] = OrderedDict()
        self.pending_turns: list[list[Any]] = []
        self.pending_messages: list[dict[str, Any]] = []
        self.pending_chars = 0  # text characters of pending_messages, counted before packing
        self.pending_uids: set[str] = set()
        self.last_key: int | None = None
        self.added = 0  # turns this run stored
        self.newest: str | None = None  # the newest ISO timestamp among them
        self.title: str | None = None
        self.batch_uids: list[str] = []
        self.stored: dict[str, tuple[int, int]] | None = None
        self.queued_chars = -1  # text of the messages written and not yet queued for search
        self.queued_count = 0  # and how many they are

    def _next_key(self) -> int:
        if not self._keys:
            self._keys = self.db.allocate_keys(BATCH, self._last_key_given + 1)
            self._keys.reverse()
        key = self._keys.pop()
        self._last_key_given = key
        return key

    # -- batches -----------------------------------------------------------------------

    def process(self, batch: list[Item], payloads: list[Payload], counted: list[int]) -> None:
        tokens = iter(counted)
        self.batch_uids = [e["id"] for _, e, _ in batch if isinstance(e.get("id"), str)]
        self.stored = None  # looked up on the first id this batch checks
        for (line, entry, patch), (kind, skip, messages) in zip(batch, payloads, strict=True):
            counts = [next(tokens) for _ in messages]
            self.counts.entries += 1
            self.one(line, entry, patch, kind, skip, messages, counts)
            if (
                entry.get("type") == "session_info"
                and isinstance(entry.get("name"), str)
                and is_storable_text(entry["name"])
            ):
                self.title = entry["name"].strip() or self.title
        self.flush()  # memory stays bounded by the batch and the cache

    def flush(self) -> None:
        if self.pending_turns:
            self.db.executemany(self.db.dialect.statements.insert_turns, self.pending_turns)
            if self.pending_messages:
                self.db.executemany(INSERT_MESSAGE_SQL, self.pending_messages)
                self.queued_chars = max(self.queued_chars, 0) + self.pending_chars
                self.queued_count += len(self.pending_messages)
        self.pending_turns = []
        self.pending_messages = []
        self.pending_chars = 0
        self.pending_uids = set()

    def complete(self) -> None:
        """Write what is pending and index the run's messages for search."""
        self.flush()
        # the run's messages join the search tail, indexed in one statement (at the
        # commit once the tail is long: store/indexqueue.py)
        if self.queued_chars >= 0:
            queue_messages(self.db, self.queued_chars, self.queued_count)
            self.queued_chars = -1
            self.queued_count = 0

    def finish(self) -> None:
        """`complete`, then point the session at the last turn stored.

        A run that stored nothing changes nothing (issue 15: a re-import moved
        ``updated_utc`` and so ``latest``). Otherwise ``updated_utc`` becomes the newest
        turn's time (or now when no entry carries one), never moving backwards, so
        ``latest`` is the latest conversation, not the last file imported.
        """
        self.complete()
        if not self.added:
            return
        if self.last_key is not None:
            (updated,) = self.db.execute(
                "select updated_utc from sessions where id = ?", [self.session_key]
            ).fetchone()
            self.db.execute(
                "update sessions set active_leaf_id = ?, updated_utc = ?, last_seq = ? "
                "where id = ?",
                [
                    self.last_key,
                    max(updated, self.newest or _now()),
                    self.last_seq,
                    self.session_key,
                ],
            )
        if self.title:
            self.db.execute(
                "update sessions set title = ? where id = ?", [self.title, self.session_key]
            )

    # -- one entry -----------------------------------------------------------------------

    def _remember(self, uid: str, row: PathRow) -> None:
        self.cache[uid] = row
        if len(self.cache) > _CACHE:
            self.cache.popitem(last=False)
            self.check_db = True

    def _stored_ids(self, uids: list[str]) -> dict[str, tuple[int, int]]:
        """``uid -> (key, seq)`` for those of ``uids`` stored before this batch.

        (Turns this batch stores are in the cache or pending, which `_known` checks
        first; those of earlier batches that the cache forgot are in the database.)
        """
        wanted = [u for u in uids if is_storable_text(u)]
        found: dict[str, tuple[int, int]] = {}
        for start in range(0, len(wanted), _LOOKUP):
            chunk: list[Any] = wanted[start : start + _LOOKUP]
            chunk += [None] * (_LOOKUP - len(chunk))
            for uid, key, seq in self.db.execute(_STORED_SQL, [self.session_key, *chunk]):
                found[uid] = (int(key), int(seq))
        return found

    def _parent(self, uid: str) -> PathRow | None:
        row = self.cache.get(uid)
        if row is not None:
            return row
        self.flush()
        found = self.db.execute(PARENT_BY_UID_SQL, [self.session_key, uid]).fetchone()
        return None if found is None else PathRow._make(found)

    def _known(self, uid: str, line: int, entry: dict[str, Any]) -> bool | None:
        """None: a new id. True: already stored (matched). False: skipped (reported)."""
        cached = self.cache.get(uid)
        if uid in self.pending_uids or (cached is not None and cached.id >= self.run_start):
            self.problem(
                line, "duplicate_id", f"id {uid!r} is used twice; the first is kept", False
            )
            return False
        if not self.check_db or (self.fresh and uid not in self.seen):
            return None
        if self.stored is None:
            self.stored = self._stored_ids(self.batch_uids)
        existing = self.stored.get(uid)
        if existing is None:
            return None
        if existing[0] >= self.run_start or existing[1] <= self.max_matched_seq:
            self.problem(
                line, "duplicate_id", f"id {uid!r} is used twice; the first is kept", False
            )
            return False
        stored = self.part.reading.get_turn(self.session_id, uid).entry
        if _same(stored, entry):
            self.max_matched_seq = existing[1]
            self.last_key = int(existing[0])
            parent = self.db.execute(PARENT_BY_UID_SQL, [self.session_key, uid]).fetchone()
            self._remember(uid, PathRow._make(parent))
            return True
        self.counts.conflicts += 1
        self.problem(
            line,
            "conflict",
            f"entry {uid!r} is already stored with different content; not overwritten",
            False,
        )
        return False

    def one(
        self,
        line: int,
        entry: dict[str, Any],
        patch: Mapping[str, Any] | None,
        kind: str,
        skip: frozenset[str],
        messages: list[dict[str, Any]],
        counts: list[int],
    ) -> None:
        uid = entry.get("id")
        if not isinstance(uid, str) or not uid:
            self.problem(line, "missing_field", f"entry has no string id ({uid!r}); skipped", False)
            return
        if not is_storable_text(uid):
            self.problem(
                line,
                "bad_text",
                f"entry id {uid!r} holds a lone surrogate or NUL (not text); skipped",
                False,
            )
            return
        if self._known(uid, line, entry) is not None:
            return
        patch_out: dict[str, Any] = dict(patch) if patch else {}
        parent_uid = entry.get("parentId")
        parent = None
        if parent_uid is not None:
            if parent_uid == uid:
                self.problem(
                    line, "self_parent", f"entry {uid!r} is its own parent; stored as a root", True
                )
                patch_out.setdefault("set", {})["parentId"] = parent_uid
            elif not isinstance(parent_uid, str) or not is_storable_text(parent_uid):
                self.problem(
                    line,
                    "bad_type",
                    f"parentId {parent_uid!r} is not a string; stored as a root",
                    True,
                )
                patch_out.setdefault("set", {})["parentId"] = parent_uid
            else:
                parent = self._parent(parent_uid)
                if parent is None:
                    self.problem(
                        line,
                        "orphan",
                        f"parent {parent_uid!r} of entry {uid!r} is not in this session (or comes "
                        "later); stored as a root",
                        True,
                    )
                    patch_out.setdefault("set", {})["parentId"] = parent_uid
        stored_entry = dict(entry)
        stored_entry["parentId"] = None if parent is None else parent_uid
        if kind == "compaction":
            self.flush()  # its first kept turn is resolved in the database
        key = self._next_key()
        values, child = appends.turn_values(
            self.db,
            self.session_key,
            self.session_id,
            parent,
            stored_entry,
            kind,
            skip,
            messages,
            counts,
            seq=self.last_seq + 1,
            key=key,
            uid=uid,
            native=False,
            patch=patch_out or None,
            fork=self.fork if parent is None else None,
        )
        self.pending_turns.append([values[c] for c in TURN_COLUMNS])
        rows = message_rows(key, messages, counts)
        self.pending_chars += sum(len(m["text"] or "") for m in rows)  # before packing
        if self.db.dialect.capabilities.compressed_content:
            compressed.pack_rows(rows)
        self.pending_messages.extend(rows)
        self.pending_uids.add(uid)
        self.seen.add(uid)
        self._remember(uid, child)
        self.last_seq += 1
        self.last_key = key
        self.added += 1
        stamp = entry.get("timestamp")
        if isinstance(stamp, str) and _ISO.match(stamp) and (self.newest or "") < stamp:
            self.newest = stamp
        self.counts.turns += 1
        if kind == "message":
            self.counts.messages += len(messages)


def _now() -> str:
    return utc_now()
