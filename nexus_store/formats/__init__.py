"""Transcript formats: read agent transcripts as pi v3 entries, and write them back.

One module per format, no SQL: `pi` (pi / OpenClaw JSONL v1-v3, read and write),
`ndjson` (the compaction-event NDJSON of seeds/002, read and write), `claude_code`
and `codex` (read). Every reader streams: a file is read line by line, entries are
produced lazily in file order, and memory stays flat whatever the file size.

Example::

    for session in parse_file("session.jsonl"):
        for parsed in session.entries:
            ...  # parsed.entry is a pi v3 entry dict
        print(session.problems)
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from nexus_store.errors import TranscriptError
from nexus_store.formats.base import LineReader, ParsedEntry, ParsedSession, Problem
from nexus_store.formats.claude_code import UsageCheck, parse_claude_code, resume_claude_code
from nexus_store.formats.codex import parse_codex, resume_codex
from nexus_store.formats.ndjson import (
    BoundaryLookup,
    collect_boundaries,
    parse_ndjson,
    resume_ndjson,
    write_ndjson,
)
from nexus_store.formats.pi import apply_patch, parse_pi, parse_pi_tail, write_pi
from nexus_store.formats.sniff import NotATranscript, check_transcript

__all__ = [
    "FORMATS",
    "NotATranscript",
    "ParsedEntry",
    "ParsedSession",
    "Problem",
    "UsageCheck",
    "apply_patch",
    "check_transcript",
    "detect_format",
    "parse_file",
    "parse_stream",
    "parse_tail",
    "write_ndjson",
    "write_pi",
]

FORMATS = ("pi", "ndjson", "claude_code", "codex")
_ALIASES = {
    "openclaw": "pi",
    "claude": "claude_code",
    "claude-code": "claude_code",
    "claudecode": "claude_code",
    "compaction-ndjson": "ndjson",
}
_DETECT_LINES = 20
_CODEX_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_CC_KEYS = {"uuid", "parentUuid", "sessionId", "isSidechain", "leafUuid", "requestId"}
_CC_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "progress",
    "attachment",
    "file-history-snapshot",
    "queue-operation",
    "custom-title",
}
_PI_TYPES = {
    "message",
    "custom_message",
    "custom",
    "compaction",
    "branch_summary",
    "model_change",
    "thinking_level_change",
    "label",
    "session_info",
}


def _first_object(line: bytes) -> dict[str, Any] | None:
    text = line.decode("utf-8", "replace").strip().lstrip("\ufeff")
    if not text.startswith("{"):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _vote(obj: dict[str, Any]) -> str | None:
    kind = obj.get("type")
    if not isinstance(kind, str):
        kind = None
    if kind == "session" and ("cwd" in obj or "version" in obj or "id" in obj):
        return "pi"
    if kind in _CODEX_TYPES and "payload" in obj:
        return "codex"
    if _CC_KEYS & obj.keys():
        return "claude_code"
    if kind == "message" and "role" in obj and "message" not in obj:
        return "ndjson"
    if kind == "compaction" and ("boundaryMessageId" in obj or "tokensBeforeCompaction" in obj):
        return "ndjson"
    if kind in _PI_TYPES and ("parentId" in obj or isinstance(obj.get("message"), dict)):
        return "pi"
    if kind in _CC_TYPES and isinstance(obj.get("message"), dict):
        return "claude_code"
    if kind in ("summary", "file-history-snapshot", "custom-title", "queue-operation"):
        return "claude_code"
    return None


def detect_format(first_lines: list[bytes]) -> str:
    """Tell a transcript's format from its first lines (content, not file name).

    Args:
        first_lines: The first raw lines of the file (about 20 are plenty).

    Returns:
        One of `FORMATS`: ``pi``, ``ndjson``, ``claude_code`` or ``codex``; ``pi``
        when no line is recognized (an empty file, for instance).
    """
    return _voted_format(first_lines) or "pi"


def _voted_format(first_lines: list[bytes]) -> str | None:
    """The format the first recognized line votes for, or None when none is recognized."""
    for line in first_lines:
        obj = _first_object(line)
        if obj is None:
            continue
        vote = _vote(obj)
        if vote is not None:
            return vote
    return None


def _check_format(format: str | None) -> str | None:
    if format is None:
        return None
    name = _ALIASES.get(format.lower(), format.lower())
    if name not in FORMATS:
        raise TranscriptError(
            f"unknown transcript format {format!r}; use one of {', '.join(FORMATS)}"
        )
    return name


def parse_stream(
    stream: BinaryIO,
    name: str,
    *,
    format: str | None = None,
    strict: bool = False,
    usage_check: UsageCheck | None = None,
) -> Iterator[ParsedSession]:
    """Read a transcript from a binary stream (a file, or stdin).

    The stream is read line by line; it must stay open until the entries of the
    session have been consumed (it is not closed here).

    Args:
        stream: A binary stream positioned at the start of the transcript.
        name: The name used in problems and errors, and to derive a source id when
            the content has none.
        format: Force a format (one of `FORMATS`); detected from content if None.
        strict: Raise at the first problem instead of repairing or skipping.
        usage_check: Claude Code: which API responses another session of the store
            already carries the usage of (see `UsageCheck`).

    Yields:
        One `ParsedSession` per file; its ``entries`` are lazy and fill
        ``problems`` as they are consumed.

    Raises:
        TranscriptError: An unknown ``format``, or (strict) the first problem.
    """
    chosen = _check_format(format)
    seekable = _seekable(stream)
    head: list[bytes] = []
    start = stream.tell() if seekable else 0
    for raw in stream:
        head.append(raw)
        if len(head) >= _DETECT_LINES:
            break
    fmt = chosen or detect_format(head)
    # A format guessed from fewer lines than detection reads, none of them recognized,
    # may change as the file grows (see ParsedSession.format_guessed).
    settled = chosen is not None or len(head) >= _DETECT_LINES or _voted_format(head) is not None
    lines: Iterable[bytes]
    if seekable:
        stream.seek(start)
        lines = stream
    elif fmt == "ndjson":
        # The boundary pre-scan needs two passes: spool stdin to a temporary file.
        spool = tempfile.TemporaryFile()
        spool.writelines(head)
        shutil.copyfileobj(stream, spool)
        spool.seek(0)
        yield from _parse(spool, name, fmt, strict, spool, usage_check=usage_check, settled=settled)
        return
    else:
        lines = itertools.chain(head, stream)
    seekable_stream = stream if seekable else None
    yield from _parse(lines, name, fmt, strict, None, seekable_stream, usage_check, settled)


def _seekable(stream: BinaryIO) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, ValueError, OSError):
        return False


def _parse(
    lines: Iterable[bytes],
    name: str,
    fmt: str,
    strict: bool,
    owned: BinaryIO | None,
    seekable: BinaryIO | None = None,
    usage_check: UsageCheck | None = None,
    settled: bool = True,
) -> Iterator[ParsedSession]:
    problems: list[Problem] = []
    if fmt == "ndjson":
        source = owned or seekable
        boundaries = collect_boundaries(source) if source is not None else set()
    reader = LineReader(lines, name, problems, strict=strict)
    if fmt == "pi":
        session = parse_pi(reader)
    elif fmt == "ndjson":
        session = parse_ndjson(reader, boundaries)
    elif fmt == "claude_code":
        session = parse_claude_code(reader, usage_check)
    else:
        session = parse_codex(reader)
    session.format_guessed = not settled
    if session.resume is not None:
        session.entries = _counting(session.entries, session, reader)
    if owned is not None:
        session.entries = _closing(session.entries, owned)
    yield session


def _counting(
    entries: Iterator[ParsedEntry], session: ParsedSession, reader: LineReader
) -> Iterator[ParsedEntry]:
    yield from entries
    if session.resume is not None:  # None: the reader found it cannot be continued
        # Where a read of the following lines starts: the next object ordinal and line.
        session.resume["objects"] = reader.count
        session.resume["lines"] = reader.last_line


def parse_tail(
    lines: Iterable[bytes],
    name: str,
    format: str,
    resume: dict[str, Any],
    *,
    first_line: int,
    strict: bool = False,
    boundary_after: BoundaryLookup | None = None,
    usage_check: UsageCheck | None = None,
) -> ParsedSession:
    """Read the lines after a checkpoint of a transcript read before (sync).

    Every format can be continued from the ``resume`` of a read that ended after a
    complete line (a Codex rollout whose header is not known yet cannot: its
    ``resume`` is None and it is read whole). Reading a file whole, or its start and
    then the rest this way, gives the same entries.

    Args:
        lines: The raw lines after the checkpoint (complete lines only); a seekable
            binary stream for NDJSON (its compaction boundaries are pre-scanned).
        name: The file name, for problems.
        format: The format of the earlier read.
        resume: The earlier read's ``resume`` (header, parser state, objects read).
        first_line: The line number of the first of ``lines`` in the file.
        strict: Raise at the first problem instead of repairing or skipping.
        boundary_after: NDJSON: finds, among the entries stored before the
            checkpoint, the message that follows a boundary message (see
            `nexus_store.formats.ndjson.BoundaryLookup`); without it such a
            boundary is reported as not found.
        usage_check: Claude Code: as for `parse_stream`.

    Returns:
        The session, with the same source id as the earlier read; ``resume`` is
        updated once its entries are exhausted.

    Raises:
        TranscriptError: A format that cannot be continued, or (strict) a problem.
    """
    problems: list[Problem] = []
    objects = int(resume.get("objects", 0))
    boundaries = _tail_boundaries(lines) if format == "ndjson" else set()
    reader = LineReader(lines, name, problems, strict=strict, first_line=first_line, count=objects)
    if format == "pi":
        session = parse_pi_tail(reader, resume)
    elif format == "claude_code":
        session = resume_claude_code(reader, resume, usage_check)
    elif format == "codex":
        session = resume_codex(reader, resume)
    elif format == "ndjson":
        session = resume_ndjson(reader, resume, boundaries, boundary_after)
    else:
        raise TranscriptError(f"a {format} transcript cannot be read from a checkpoint")
    session.entries = _counting(session.entries, session, reader)
    return session


def _tail_boundaries(lines: Iterable[bytes]) -> set[str]:
    stream: Any = lines
    if not _seekable(stream):
        raise TranscriptError("an NDJSON transcript is continued from a seekable stream only")
    return collect_boundaries(stream)


def _closing(entries: Iterator[ParsedEntry], handle: BinaryIO) -> Iterator[ParsedEntry]:
    try:
        yield from entries
    finally:
        handle.close()


def parse_file(
    path: str | Path,
    *,
    format: str | None = None,
    strict: bool = False,
    on_open: Callable[[BinaryIO], None] | None = None,
    usage_check: UsageCheck | None = None,
) -> Iterator[ParsedSession]:
    """Read a transcript file.

    The file is opened in binary and read line by line; it is closed once the
    session's entries have been consumed (or the iterator is discarded).

    Args:
        path: The transcript's path.
        format: Force a format (one of `FORMATS`); detected from content if None.
        strict: Raise `TranscriptError` at the first problem instead of repairing
            or skipping.
        on_open: Called with the open file, whose position then tells how far
            reading has come (the import's progress inside one file).
        usage_check: Claude Code: as for `parse_stream`.

    Yields:
        One `ParsedSession` (entries lazy; problems filled while they are read).

    Raises:
        TranscriptError: An unknown ``format``, or (strict) the first problem.
        OSError: The file cannot be opened.
    """
    chosen = _check_format(format)
    handle = open(path, "rb")  # closed by _closing when entries end
    if on_open is not None:
        on_open(handle)
    try:
        sessions = parse_stream(
            handle, str(path), format=chosen, strict=strict, usage_check=usage_check
        )
        for session in sessions:
            session.entries = _closing(session.entries, handle)
            yield session
    except Exception:
        handle.close()
        raise
