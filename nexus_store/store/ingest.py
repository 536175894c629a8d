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
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nexus_store.errors import ConflictError
from nexus_store.rows import dumps

__all__ = ["IngestCounts", "IngestMixin", "ProblemSink"]

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


class IngestMixin:
    """The ingest method of `Store` (see there)."""

    conn: sqlite3.Connection

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

        with self.atomic():  # type: ignore[attr-defined]
            # Keys only grow, so a turn at or past this key was stored by this run:
            # a second entry with its id is a duplicate in the file, not a conflict.
            self._run_start_key = int(
                self.conn.execute("select coalesce(max(id), 0) + 1 from turns").fetchone()[0]
            )
            session_key, session_id = self._ensure_imported_session(
                header, source_format, source_id, source_path, source_version, parent_source_id
            )
            self._last_seq = int(
                self.conn.execute(
                    "select last_seq from sessions where id = ?", [session_key]
                ).fetchone()[0]
            )
            last_key: int | None = None
            title: str | None = None
            for line, entry, patch in entries:
                counts.entries += 1
                key = self._ingest_one(session_key, session_id, line, entry, patch, counts, problem)
                if key is not None:
                    last_key = key
                if entry.get("type") == "session_info" and isinstance(entry.get("name"), str):
                    title = entry["name"].strip() or title
            if last_key is not None:
                self.conn.execute(
                    "update sessions set active_leaf_id = ?, updated_utc = ?, last_seq = ? "
                    "where id = ?",
                    [last_key, _now(), self._last_seq, session_key],
                )
            if title:
                self.conn.execute("update sessions set title = ? where id = ?", [title, session_key])
        return session_id, counts

    def _ensure_imported_session(
        self,
        header: Mapping[str, Any],
        source_format: str,
        source_id: str,
        source_path: str | None,
        source_version: int | None,
        parent_source_id: str | None,
    ) -> tuple[int, str]:
        row = self.conn.execute(
            "select id, uid from sessions where source_format = ? and source_id = ?",
            [source_format, source_id],
        ).fetchone()
        if row is not None:
            return int(row[0]), str(row[1])
        uid = source_id
        if self.conn.execute("select 1 from sessions where uid = ?", [uid]).fetchone():
            uid = f"{source_id}-{source_format}"
        n = 1
        while self.conn.execute("select 1 from sessions where uid = ?", [uid]).fetchone():
            n += 1
            uid = f"{source_id}-{source_format}-{n}"
        parent_key = None
        if parent_source_id is not None:
            parent = self.conn.execute(
                "select id from sessions where source_id = ? order by id limit 1", [parent_source_id]
            ).fetchone()
            parent_key = None if parent is None else parent[0]
        created = header.get("timestamp") if isinstance(header.get("timestamp"), str) else _now()
        cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else None
        rest = {k: v for k, v in header.items() if k not in ("cwd",)}
        cursor = self.conn.execute(
            "insert into sessions (uid, cwd, created_utc, updated_utc, parent_session_id, "
            "source_format, source_path, source_id, source_version, header_json) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                uid,
                cwd,
                created,
                _now(),
                parent_key,
                source_format,
                source_path,
                source_id,
                source_version,
                dumps(rest),
            ],
        )
        return int(cursor.lastrowid or 0), uid

    def _ingest_one(
        self,
        session_key: int,
        session_id: str,
        line: int,
        entry: dict[str, Any],
        patch: Mapping[str, Any] | None,
        counts: IngestCounts,
        problem: Callable[[int, str, str, bool], None],
    ) -> int | None:
        uid = entry.get("id")
        if not isinstance(uid, str) or not uid:
            problem(line, "missing_field", f"entry has no string id ({uid!r}); skipped", False)
            return None
        existing = self.conn.execute(
            "select id from turns where session_id = ? and uid = ?", [session_key, uid]
        ).fetchone()
        if existing is not None:
            stored = self.get_turn(session_id, uid).entry  # type: ignore[attr-defined]
            if _same(stored, entry):
                return int(existing[0])  # already imported: nothing to do
            if self._imported_in_this_run(existing[0]):
                problem(line, "duplicate_id", f"id {uid!r} is used twice; the first is kept", False)
            else:
                counts.conflicts += 1
                problem(
                    line,
                    "conflict",
                    f"entry {uid!r} is already stored with different content; not overwritten",
                    False,
                )
            return None
        patch_out: dict[str, Any] = dict(patch) if patch else {}
        parent_uid = entry.get("parentId")
        parent = None
        if parent_uid is not None:
            if parent_uid == uid:
                problem(line, "self_parent", f"entry {uid!r} is its own parent; stored as a root", True)
                patch_out.setdefault("set", {})["parentId"] = parent_uid
            elif not isinstance(parent_uid, str):
                problem(line, "bad_type", f"parentId {parent_uid!r} is not a string; stored as a root", True)
                patch_out.setdefault("set", {})["parentId"] = parent_uid
            else:
                from nexus_store.store.core import PARENT_BY_UID_SQL

                parent = self.conn.execute(PARENT_BY_UID_SQL, [session_key, parent_uid]).fetchone()
                if parent is None:
                    problem(
                        line,
                        "orphan",
                        f"parent {parent_uid!r} of entry {uid!r} is not in this session (or comes "
                        "later); stored as a root",
                        True,
                    )
                    patch_out.setdefault("set", {})["parentId"] = parent_uid
        stored_entry = dict(entry)
        stored_entry["parentId"] = None if parent is None else parent_uid
        self._last_seq += 1
        turn = self._insert_turn(  # type: ignore[attr-defined]
            session_key,
            session_id,
            parent,
            stored_entry,
            native=False,
            seq=self._last_seq,
            patch=patch_out or None,
        )
        counts.turns += 1
        message = turn.entry.get("messages") or ([turn.entry["message"]] if "message" in turn.entry else [])
        counts.messages += len(message) if turn.kind == "message" else 0
        return int(self._last_turn_key)  # type: ignore[attr-defined]

    def _imported_in_this_run(self, key: int) -> bool:
        return key >= self._run_start_key

    _run_start_key = 0
    _last_seq = -1


def _now() -> str:
    from nexus_store.store.core import utc_now

    return utc_now()
