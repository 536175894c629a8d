"""Importing transcript files and exporting sessions back to JSONL.

Import: each file is parsed by `nexus_store.formats` (streamed, line by line) and
stored by `Store.ingest` in one transaction, so a crash or Ctrl-C mid-file leaves
nothing of that file. Re-importing is idempotent (keyed on source ids); a longer
version of a file adds only its new entries. Problems are reported with file and
line; ``strict=True`` stops at the first one and stores nothing of that file.

Export: the whole tree (or the path to one leaf) as pi v3 JSONL, or as the
compaction-event NDJSON. For pi v3 input, import then export gives back the same
JSON values line for line: fields without a column come back from ``extra_json``,
and the source's irregularities (an absent ``parentId``, a parent in another
file) from each turn's ``source_patch_json``.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, TextIO, cast

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import ConflictError, NexusError, TranscriptError
from nexus_store.formats import (
    ParsedSession,
    Problem,
    apply_patch,
    parse_file,
    parse_stream,
    write_ndjson,
    write_pi,
)
from nexus_store.safe_write import private_text_file
from nexus_store.store.ingest import HEADER_KEY

__all__ = ["ImportReport", "TransferMixin", "find_transcripts"]

_PATTERNS = ("*.jsonl", "*.ndjson", "*.jsonl.reset.*")


class ImportReport(BaseModel):
    """What an import did.

    Attributes:
        files: Files read.
        sessions: Ids of the sessions written or touched, in import order.
        entries: Entries read from the files.
        turns: Turns added (0 for a file imported before).
        messages: Messages added.
        repaired: Entries stored with a repair (glued lines split, orphans made roots...).
        skipped: Lines or entries left out (bad JSON, cut-off lines, duplicates...).
        conflicts: Entries already stored with different content (never overwritten).
        errors: Files that could not be imported at all, with the reason.
        problems: Every problem, with file and line.
        bytes: Bytes of the files read.
        seconds: Wall time.
    """

    model_config = ConfigDict(extra="forbid")

    files: int = 0
    sessions: list[str] = []
    entries: int = 0
    turns: int = 0
    messages: int = 0
    repaired: int = 0
    skipped: int = 0
    conflicts: int = 0
    errors: list[str] = []
    problems: list[dict[str, Any]] = []
    bytes: int = 0
    seconds: float = 0.0


def find_transcripts(path: Path) -> list[Path]:
    """Transcript files under ``path`` (itself if it is a file), parents before sub-agents."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise NexusError(f"no such file or directory: {path}")
    found = {p for pattern in _PATTERNS for p in path.rglob(pattern) if p.is_file()}
    # Sub-agent transcripts (Claude Code agent-*.jsonl) after the sessions they belong to.
    return sorted(found, key=lambda p: (p.name.startswith("agent-"), str(p)))


# A session's active leaf and its last turn (the entry an export writes last).
ACTIVE_AND_LAST_SQL = """
select (select uid from turns where id = s.active_leaf_id),
       (select uid from turns where session_id = s.id order by seq desc limit 1)
from sessions s where s.id = ?
"""

ProgressCallback = Callable[[int, int], None]
"""Called as progress(bytes_done, entries_done) while importing."""


def _collector(seen: list[Problem], path: str) -> Callable[[int, str, str, bool], None]:
    def on_problem(line: int, kind: str, message: str, repaired: bool) -> None:
        seen.append(Problem(path, line, kind, message, repaired))

    return on_problem


_PROGRESS_EVERY = 500  # entries between progress reports inside one file


def _entries(
    parsed: ParsedSession,
    progress: ProgressCallback | None,
    done_bytes: int,
    before: int,
    position: Callable[[], int],
) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """The entries as ingest takes them, reporting the bytes read so far in the file.

    ``position`` is how far reading the current file has come, so a large file moves
    the bar as it goes (issue 15: a 134 MB file sat at 0% for 14 s, then jumped).
    """
    for n, item in enumerate(parsed.entries, 1):
        if progress is not None and n % _PROGRESS_EVERY == 0:
            progress(done_bytes + position(), before + n)
        yield item.line, item.entry, item.patch


class _Position:
    """Bytes read so far of the file being imported (0 for a stream), at most its size."""

    def __init__(self, opened: list[BinaryIO], size: int) -> None:
        self.opened = opened
        self.size = size

    def __call__(self) -> int:
        if not self.opened or self.opened[0].closed:
            return 0
        return min(self.size, self.opened[0].tell())


class TransferMixin:
    """Import and export methods of `Store` (see there)."""

    def import_jsonl(
        self, path: str | Path, *, format: str | None = None, strict: bool = False
    ) -> list[str]:
        """Import one transcript file (or every transcript under a directory).

        Args:
            path: A JSONL file or a directory (searched recursively).
            format: ``pi``, ``ndjson``, ``claude_code`` or ``codex``; detected from the
                content when omitted.
            strict: Stop at the first problem of a file and store nothing of it.

        Returns:
            The ids of the sessions imported.

        Raises:
            TranscriptError: In strict mode, at the first problem (file and line).
        """
        report = self.import_paths([path], format=format, strict=strict)
        if strict and report.errors:
            raise TranscriptError(report.errors[0])
        return report.sessions

    def import_paths(
        self,
        paths: list[str | Path],
        *,
        format: str | None = None,
        strict: bool = False,
        progress: ProgressCallback | None = None,
        stdin: IO[bytes] | None = None,
    ) -> ImportReport:
        """Import files, directories and ``-`` (standard input); report what happened.

        Each file is imported in its own transaction: a file that fails (strict mode,
        or an unreadable file) is left out whole and listed in ``errors``; the others
        are kept.

        Args:
            paths: Files, directories, or ``"-"`` for standard input.
            format: Force a format instead of detecting it.
            strict: All or nothing per file, stopping at its first problem.
            progress: Receives (bytes done, entries done) as the import goes.
            stdin: Stream read for ``"-"`` (default: ``sys.stdin.buffer``).

        Returns:
            An ImportReport.
        """
        started = time.monotonic()
        report = ImportReport()
        files: list[Path | None] = []
        for item in paths:
            if str(item) == "-":
                files.append(None)
            else:
                files.extend(find_transcripts(Path(item)))
        done_bytes = 0
        for file in files:
            size = 0 if file is None else file.stat().st_size
            opened: list[BinaryIO] = []
            position = _Position(opened, size)
            try:
                if file is None:
                    stream = stdin if stdin is not None else sys.stdin.buffer
                    sessions = parse_stream(
                        cast(BinaryIO, stream), "<stdin>", format=format, strict=strict
                    )
                    self._import_sessions(sessions, report, strict, progress, done_bytes, position)
                else:
                    sessions = parse_file(file, format=format, strict=strict, on_open=opened.append)
                    self._import_sessions(sessions, report, strict, progress, done_bytes, position)
            except (TranscriptError, ConflictError) as err:
                report.errors.append(str(err))
            except OSError as err:
                report.errors.append(f"{file}: {err.strerror or err}")
            report.files += 1
            done_bytes += size
            report.bytes = done_bytes
            if progress is not None:
                progress(done_bytes, report.entries)
        report.seconds = round(time.monotonic() - started, 3)
        return report

    def _import_sessions(
        self,
        sessions: Iterator[ParsedSession],
        report: ImportReport,
        strict: bool,
        progress: ProgressCallback | None,
        done_bytes: int,
        position: Callable[[], int],
    ) -> None:
        for parsed in sessions:
            seen: list[Problem] = []
            on_problem = _collector(seen, parsed.path)
            entries = _entries(parsed, progress, done_bytes, report.entries, position)

            session_id, counts = self.ingest(  # type: ignore[attr-defined]
                parsed.header,
                entries,
                source_format=parsed.source_format,
                source_id=parsed.source_id,
                source_path=parsed.path,
                source_version=parsed.source_version,
                parent_source_id=parsed.parent_source_id,
                on_problem=on_problem,
                strict=strict,
            )
            problems = [*parsed.problems, *seen]
            report.sessions.append(session_id)
            report.entries += counts.entries
            report.turns += counts.turns
            report.messages += counts.messages
            report.conflicts += counts.conflicts
            report.repaired += counts.repaired + sum(p.repaired for p in parsed.problems)
            report.skipped += counts.skipped + sum(not p.repaired for p in parsed.problems)
            report.problems.extend(
                {
                    "path": p.path,
                    "line": p.line,
                    "kind": p.kind,
                    "message": p.message,
                    "repaired": p.repaired,
                }
                for p in problems
            )

    # -- export ------------------------------------------------------------------------

    def iter_export_entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the session's entries as the source wrote them (patches applied).

        Args:
            session_id: The session.
            leaf_id: Only the path to this leaf (default: the whole tree).
        """
        turns = (
            self.path(session_id, leaf_id)  # type: ignore[attr-defined]
            if leaf_id is not None
            else self.iter_turns(session_id)  # type: ignore[attr-defined]
        )
        patches = self._patches(session_id)
        for turn in turns:
            patch = patches.get(turn.id)
            yield apply_patch(turn.entry, patch) if patch else turn.entry

    def _patches(self, session_id: str) -> dict[str, Any]:
        session_key = self._session_row(session_id)[0]  # type: ignore[attr-defined]
        return {
            uid: json.loads(patch)
            for uid, patch in self.conn.execute(  # type: ignore[attr-defined]
                "select uid, source_patch_json from turns "
                "where session_id = ? and source_patch_json is not null",
                [session_key],
            )
        }

    def export_header(self, session_id: str) -> dict[str, Any]:
        """The session header line for export (pi v3)."""
        row = self.conn.execute(  # type: ignore[attr-defined]
            "select uid, cwd, created_utc, header_json, source_id, parent_session_id "
            "from sessions where uid = ?",
            [session_id],
        ).fetchone()
        if row is None:
            self._session_row(session_id)  # type: ignore[attr-defined]  # raises SessionNotFound
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
        session = self.get_session(session_id)  # type: ignore[attr-defined]
        patches = self._patches(session_id)
        entries = []
        for turn in self.iter_turns(session_id):  # type: ignore[attr-defined]
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
        session_id, _ = self.ingest(  # type: ignore[attr-defined]
            header,
            items(),
            source_format=session.get("source_format") or "backup",
            source_id=session.get("source_id") or session["id"],
            source_path=session.get("source_path"),
            strict=True,
        )
        with self.atomic():  # type: ignore[attr-defined]
            key = self._session_row(session_id)[0]  # type: ignore[attr-defined]
            leaf = session.get("active_leaf")
            leaf_key = (
                None if leaf is None else self._turn_key(key, session_id, leaf)  # type: ignore[attr-defined]
            )
            self.conn.execute(  # type: ignore[attr-defined]
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
        row = self.conn.execute(  # type: ignore[attr-defined]
            ACTIVE_AND_LAST_SQL,
            [self._session_row(session_id)[0]],  # type: ignore[attr-defined]
        ).fetchone()
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
