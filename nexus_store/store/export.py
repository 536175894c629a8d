"""Exporting sessions back to JSONL, and whole-session backups (part `Export`).

Export: the whole tree (or the path to one leaf) as pi v3 JSONL, or as the
compaction-event NDJSON. For pi v3 input, import then export gives back the same
JSON values line for line: fields without a column come back from ``extra_json``,
and the source's irregularities (an absent ``parentId``, a parent in another
file) from each turn's ``source_patch_json``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TextIO, cast

from nexus_store.errors import NexusError
from nexus_store.formats import apply_patch, write_ndjson, write_pi
from nexus_store.safe_write import private_text_file
from nexus_store.store.db import Handle
from nexus_store.store.ingest import HEADER_KEY, Ingest
from nexus_store.store.reading import Reading

__all__ = ["ACTIVE_AND_LAST_SQL", "Export"]

# A session's active leaf and its last turn (the entry an export writes last).
ACTIVE_AND_LAST_SQL = """
select (select uid from turns where id = s.active_leaf_id),
       (select uid from turns where session_id = s.id order by seq desc limit 1)
from sessions s where s.id = ?
"""


class Export:
    """Export, backup and restore of sessions.

    Args:
        db: The database handle.
        reading: The reading part (turns and paths to write).
        ingest: The ingest part (a restore stores its entries as an import does).
    """

    def __init__(self, db: Handle, reading: Reading, ingest: Ingest) -> None:
        self.db = db
        self.reading = reading
        self.ingest = ingest

    def iter_export_entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the session's entries as the source wrote them (patches applied).

        Args:
            session_id: The session.
            leaf_id: Only the path to this leaf (default: the whole tree).
        """
        turns = (
            self.reading.path(session_id, leaf_id)
            if leaf_id is not None
            else self.reading.iter_turns(session_id)
        )
        patches = self.patches(session_id)
        for turn in turns:
            patch = patches.get(turn.id)
            yield apply_patch(turn.entry, patch) if patch else turn.entry

    def patches(self, session_id: str) -> dict[str, Any]:
        """The source patch of each turn that has one, by turn id."""
        session_key = self.db.session_row(session_id)[0]
        return {
            uid: json.loads(patch)
            for uid, patch in self.db.execute(
                "select uid, source_patch_json from turns "
                "where session_id = ? and source_patch_json is not null",
                [session_key],
            )
        }

    def export_header(self, session_id: str) -> dict[str, Any]:
        """The session header line for export (pi v3)."""
        row = self.db.execute(
            "select uid, cwd, created_utc, header_json, source_id, parent_session_id "
            "from sessions where uid = ?",
            [session_id],
        ).fetchone()
        if row is None:
            self.db.session_row(session_id)  # raises SessionNotFound
        header: dict[str, Any] = json.loads(row[3]) if row[3] else {}
        if not header:
            header = {"type": "session", "version": 3, "id": row[0], "timestamp": row[2]}
            if row[1] is not None:
                header["cwd"] = row[1]
        else:
            header.setdefault("type", "session")
            if row[1] is not None:
                header["cwd"] = row[1]
            if header.get("version") != 3:
                header["version"] = 3  # v1/v2 input exports as v3
        return header

    def backup_session(self, session_id: str) -> dict[str, Any]:
        """A JSON backup of one session from which `restore_session` rebuilds it identically.

        Returns:
            ``{"nexus_store_backup": 1, "session": {...}, "header": {...}, "entries": [...]}``
            where each entry carries its source patch under ``"_patch"`` when it has one.
        """
        session = self.reading.get_session(session_id)
        patches = self.patches(session_id)
        entries = []
        for turn in self.reading.iter_turns(session_id):
            item = dict(turn.entry)
            if turn.id in patches:
                item["_patch"] = patches[turn.id]
            entries.append(item)
        return {
            "nexus_store_backup": 1,
            "session": session.model_dump(),
            "header": self.export_header(session_id),
            "entries": entries,
        }

    def restore_session(self, backup: dict[str, Any]) -> str:
        """Rebuild a session from `backup_session` output: same ids, tree and active leaf.

        Restoring into a database that already holds the session changes nothing.

        Raises:
            NexusError: If the data is not a nexus_store session backup.
        """
        if not isinstance(backup, dict) or backup.get("nexus_store_backup") != 1:
            raise NexusError("not a nexus_store session backup (expected nexus_store_backup: 1)")
        session = backup["session"]
        entries = backup.get("entries") or []

        def items() -> Iterator[tuple[int, dict[str, Any], Any]]:
            for n, entry in enumerate(entries, 1):
                entry = dict(entry)
                patch = entry.pop("_patch", None)
                yield n, entry, patch

        header = dict(backup.get("header") or {})
        header["id"] = session["id"]
        session_id, _ = self.ingest.ingest(
            header,
            items(),
            source_format=session.get("source_format") or "backup",
            source_id=session.get("source_id") or session["id"],
            source_path=session.get("source_path"),
            strict=True,
        )
        with self.db.atomic():
            key = self.db.session_row(session_id)[0]
            leaf = session.get("active_leaf")
            leaf_key = None if leaf is None else self.db.turn_key(key, session_id, leaf)
            self.db.execute(
                "update sessions set active_leaf_id = ?, title = ?, flush_epoch = ? where id = ?",
                [leaf_key, session.get("title"), session.get("flush_epoch"), key],
            )
        return str(session_id)

    def _declare_active_leaf(self, session_id: str, header: dict[str, Any]) -> dict[str, Any]:
        """The header, naming the active leaf when it is not the last entry written.

        pi takes the last entry of a file as the leaf, so a session navigated back to an
        earlier turn would lose where it was (issue 15); the header then carries
        ``{"nexusStore": {"activeLeafId": ...}}``, which import reads back and pi
        ignores. Otherwise the key is left out, so an import's export is unchanged.
        """
        row = self.db.execute(ACTIVE_AND_LAST_SQL, [self.db.session_key(session_id)]).fetchone()
        declared = header.get(HEADER_KEY)
        if not isinstance(declared, dict):
            declared = None  # not ours to interpret; replaced only if a leaf must be named
        ours = dict(declared or {})
        ours.pop("activeLeafId", None)
        if row is not None and row[0] is not None and row[0] != row[1]:
            ours["activeLeafId"] = row[0]
        elif declared is None:
            return header
        out = {k: v for k, v in header.items() if k != HEADER_KEY}
        if ours:
            out[HEADER_KEY] = ours
        return out

    def export_jsonl(
        self,
        session_id: str,
        out: str | Path | IO[str],
        *,
        leaf_id: str | None = None,
        format: str = "pi",
    ) -> int:
        """Write a session as JSONL the source tool loads.

        Args:
            session_id: The session.
            out: A file path (created or replaced) or a text stream.
            leaf_id: Only the path to this leaf (default: the whole tree).
            format: ``pi`` (pi / OpenClaw v3) or ``ndjson`` (the compaction-event NDJSON).

        Returns:
            The number of lines written.

        Raises:
            NexusError: For an unknown format.
        """
        writers = {"pi": write_pi, "ndjson": write_ndjson}
        if format not in writers:
            raise NexusError(f"unknown export format {format!r}; choose pi or ndjson")
        header = self.export_header(session_id)
        if format == "pi" and leaf_id is None:
            header = self._declare_active_leaf(session_id, header)
        entries = self.iter_export_entries(session_id, leaf_id)
        if isinstance(out, (str, Path)):
            # never a half-written file at the target, never through a planted link,
            # never readable by others (issue 18)
            with private_text_file(out) as handle:
                count = writers[format](header, entries, handle)
            return count
        if isinstance(out, io.TextIOBase) or hasattr(out, "write"):
            return writers[format](header, entries, cast(TextIO, out))
        raise NexusError(f"cannot write to {out!r}")
