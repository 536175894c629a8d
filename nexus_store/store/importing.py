"""Importing transcript files (part `Importer`).

Each file is parsed by `nexus_store.formats` (streamed, line by line) and
stored by `Store.ingest` in one transaction, so a crash or Ctrl-C mid-file leaves
nothing of that file. Re-importing is idempotent (keyed on source ids); a longer
version of a file adds only its new entries. Problems are reported with file and
line; ``strict=True`` stops at the first one and stores nothing of that file.
Claude Code usage counts once across the store (`ResponseUsage`): a response another
session already carries (history a resumed session copied) is stored without usage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from pydantic import BaseModel, ConfigDict

from nexus_store.errors import ConflictError, NexusError, TranscriptError
from nexus_store.formats import (
    NotATranscript,
    ParsedSession,
    Problem,
    check_transcript,
    parse_file,
    parse_stream,
)
from nexus_store.formats.sniff import OPENCLAW_STORE
from nexus_store.store.checkpoints import Checkpoints
from nexus_store.store.ingest import Ingest, IngestCounts
from nexus_store.store.openclaw_source import OpenClawStore
from nexus_store.store.responses import ResponseUsage

__all__ = ["ImportReport", "Importer", "ProgressCallback", "find_transcripts"]

_PATTERNS = ("*.jsonl", "*.ndjson", "*.jsonl.reset.*", "openclaw-agent.sqlite")


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
        not_transcripts: Paths that hold no transcript ("not a transcript: PATH
            (why)": a binary file, an archive, a README, a folder without
            transcripts); no session is made for them.
        problems: Every problem, with file and line.
        bytes: Bytes of the files read.
        seconds: Wall time.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    files: int = 0
    sessions: list[str] = []
    entries: int = 0
    turns: int = 0
    messages: int = 0
    repaired: int = 0
    skipped: int = 0
    conflicts: int = 0
    errors: list[str] = []
    not_transcripts: list[str] = []
    problems: list[dict[str, Any]] = []
    bytes: int = 0
    seconds: float = 0.0

    def add_session(
        self,
        session_id: str,
        counts: IngestCounts,
        read: list[Problem],
        stored: list[Problem],
    ) -> None:
        """Add what storing one parsed session did (counts and problems) to the report.

        Args:
            session_id: The session written or touched.
            counts: What `Ingest.ingest` did.
            read: Problems the reader met (repaired lines count as repaired, the
                others as skipped).
            stored: Problems met while storing (already counted in ``counts``).
        """
        self.sessions.append(session_id)
        self.entries += counts.entries
        self.turns += counts.turns
        self.messages += counts.messages
        self.conflicts += counts.conflicts
        self.repaired += counts.repaired + sum(p.repaired for p in read)
        self.skipped += counts.skipped + sum(not p.repaired for p in read)
        self.problems.extend(
            {
                "path": p.path,
                "line": p.line,
                "kind": p.kind,
                "message": p.message,
                "repaired": p.repaired,
            }
            for p in [*read, *stored]
        )


def find_transcripts(path: Path) -> list[Path]:
    """Transcript files under ``path`` (itself if it is a file), parents before sub-agents."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise NexusError(f"no such file or directory: {path}")
    found = {p for pattern in _PATTERNS for p in path.rglob(pattern) if p.is_file()}
    # Sub-agent transcripts (Claude Code agent-*.jsonl) after the sessions they belong to.
    return sorted(found, key=lambda p: (p.name.startswith("agent-"), str(p)))


ProgressCallback = Callable[[int, int], None]
"""Called as progress(bytes_done, entries_done) while importing."""


def _collector(seen: list[Problem], path: str) -> Callable[[int, str, str, bool], None]:
    def on_problem(line: int, kind: str, message: str, repaired: bool) -> None:
        seen.append(Problem(path, line, kind, message, repaired))

    return on_problem


def ingest_parsed(
    ingest: Callable[..., tuple[str, IngestCounts]],
    usage: ResponseUsage,
    parsed: ParsedSession,
    entries: Iterator[tuple[int, dict[str, Any], Any]],
    on_problem: Callable[[int, str, str, bool], None],
    strict: bool,
) -> tuple[str, IngestCounts]:
    """Ingest one parsed session and record the Claude Code responses it now counts.

    The one path import and sync share; the caller holds the transaction, so the
    entries and the responses they count commit together.

    Args:
        ingest: `Ingest.ingest` (or `Store.ingest`).
        usage: The store's `ResponseUsage`.
        parsed: The session read from its file.
        entries: ``(line, entry, patch)`` triples, as `Ingest.ingest` takes them.
        on_problem: Receives each problem found while storing.
        strict: Stop at the first problem, storing nothing of the session.

    Returns:
        The session's id and what was stored.
    """
    before = usage.last_seq(parsed.source_format, parsed.source_id)
    session_id, counts = ingest(
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
    if parsed.source_format == "claude_code":
        usage.record(parsed.source_format, parsed.source_id, before)
    return session_id, counts


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


class Importer:
    """``Store.import_jsonl`` and ``Store.import_paths``.

    Args:
        ingest: The ingest part, which stores each parsed transcript.
    """

    def __init__(self, ingest: Ingest) -> None:
        self.ingest = ingest
        self.usage = ResponseUsage(ingest.db)

    def _usage_check(self, source_id: str, key: str) -> bool:
        return self.usage.counted_elsewhere("claude_code", source_id, key)

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
                found = find_transcripts(Path(item))
                if not found:
                    report.not_transcripts.append(
                        f"not a transcript: {item} (no transcript files in it)"
                    )
                files.extend(found)
        done_bytes = 0
        for file in files:
            size = 0 if file is None else file.stat().st_size
            opened: list[BinaryIO] = []
            position = _Position(opened, size)
            try:
                kind = None if file is None or format is not None else check_transcript(file)
                if file is not None and kind == OPENCLAW_STORE:
                    self._import_openclaw(file, report, strict, progress, done_bytes)
                elif file is None:
                    stream = stdin if stdin is not None else sys.stdin.buffer
                    sessions = parse_stream(
                        cast(BinaryIO, stream),
                        "<stdin>",
                        format=format,
                        strict=strict,
                        usage_check=self._usage_check,
                    )
                    self._import_sessions(sessions, report, strict, progress, done_bytes, position)
                else:
                    sessions = parse_file(
                        file,
                        format=format,
                        strict=strict,
                        on_open=opened.append,
                        usage_check=self._usage_check,
                    )
                    self._import_sessions(sessions, report, strict, progress, done_bytes, position)
            except NotATranscript as err:
                report.not_transcripts.append(str(err))
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

    def _import_openclaw(
        self,
        path: Path,
        report: ImportReport,
        strict: bool,
        progress: ProgressCallback | None,
        done_bytes: int,
    ) -> None:
        # Every session of an OpenClaw agent database, read-only; each in its own
        # transaction, its window lineage kept (see nexus_store.sync.openclaw).
        db = self.ingest.db
        checkpoints = Checkpoints(db.conn)
        with OpenClawStore(path) as source:
            for window, parsed in source.sessions():
                self._import_sessions(
                    iter([parsed]), report, strict, progress, done_bytes, lambda: 0
                )
                key = checkpoints.session_key(report.sessions[-1])
                if key is None:
                    continue
                with db.atomic():
                    checkpoints.record_lineage(
                        key,
                        previous_source_id=window.previous_session_id,
                        reason=window.reason,
                        openclaw_key=window.session_key,
                        source_path=str(path),
                    )
        with db.atomic():
            checkpoints.link_parents()

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

            with self.ingest.db.atomic():  # the entries and the responses they count
                session_id, counts = ingest_parsed(
                    self.ingest.ingest, self.usage, parsed, entries, on_problem, strict
                )
            report.add_session(session_id, counts, parsed.problems, seen)
