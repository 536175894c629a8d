"""The values every transcript parser produces, and the line reader they share.

A parser turns one transcript file into a `ParsedSession`: a header, a lazy stream
of `ParsedEntry` values (pi v3 session entries, in file order, with ``parentId`` as
the source wrote it) and the list of `Problem` values met on the way. Parent links
are not resolved here: orphans, cycles and duplicated ids are the store's business.

`LineReader` reads a binary stream line by line (never the whole file), decodes
each line as UTF-8 (invalid bytes become U+FFFD, reported), splits objects glued on
one line, and skips blank lines silently and bad lines with a `Problem`. With
``strict=True`` the first problem raises `TranscriptError` instead.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from nexus_store.errors import TranscriptError
from nexus_store.jsoncodec import has_long_number

__all__ = [
    "RESERVED_KEYS",
    "BoundedMap",
    "LineReader",
    "ParsedEntry",
    "ParsedSession",
    "Problem",
    "add_extras",
    "dumps",
    "epoch_to_iso",
    "id_generator",
    "iso_to_epoch_ms",
    "source_id_from_name",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One odd thing met in a transcript, with where it was and what was done about it.

    Attributes:
        path: The file (or stream name) the line comes from.
        line: 1-based line number in that file.
        kind: A short tag: ``glued``, ``bad_json``, ``truncated``, ``not_object``,
            ``invalid_utf8``, ``missing_field``, ``bad_type``, ``bad_reference``.
        message: One sentence naming what and where.
        repaired: True when the line was imported with a repair (the message says
            which), False when it was skipped.
    """

    path: str
    line: int
    kind: str
    message: str
    repaired: bool


@dataclass(slots=True)
class ParsedEntry:
    """One pi v3 session entry read from a transcript.

    Attributes:
        line: Source line (the first one if several lines were merged).
        entry: The pi v3 entry dict (``type``, ``id``, ``parentId``, ``timestamp``,
            kind fields; ``message`` or ``messages`` for message turns). Source
            fields with no pi equivalent stay as extra keys.
        patch: pi v3 input only: how to get the source line back from ``entry``
            (``{"unset": [...], "set": {...}}``, see `apply_patch`); None when
            ``entry`` equals the source line.
    """

    line: int
    entry: dict[str, Any]
    patch: dict[str, Any] | None = None


@dataclass
class ParsedSession:
    """One session read from a transcript; ``entries`` is lazy and fills ``problems``.

    Attributes:
        path: The file (or stream name) it was read from.
        source_format: ``pi``, ``ndjson``, ``claude_code`` or ``codex``.
        source_version: pi session version (1, 2 or 3); None for other formats.
        source_id: Stable idempotence key (header id, Claude Code sessionId, Codex
            session id, or derived from the file name); never random.
        header: pi: the header line as written; other formats: a synthesized
            ``{"type": "session", "version": 3, "id", "timestamp", "cwd", ...}``.
        parent_source_id: The parent session's source_id for sub-agent files.
        entries: Entries in file order, streamed; memory stays flat.
        problems: Problems met so far; appended to while ``entries`` is consumed.
        resume: For formats a sync can continue mid-file (pi v2/v3, Claude Code):
            what a later read of the lines after the last one needs (header, parser
            state, ``objects`` read so far), complete once ``entries`` is exhausted;
            None for formats that are re-read whole.
        format_guessed: The format was a guess: fewer lines than detection reads,
            none of them recognized. It may change as the file grows, so sync waits
            before storing such a file; import stores it as guessed.
    """

    path: str
    source_format: str
    source_version: int | None
    source_id: str
    header: dict[str, Any]
    parent_source_id: str | None
    entries: Iterator[ParsedEntry]
    problems: list[Problem] = field(default_factory=list)
    resume: dict[str, Any] | None = None
    format_guessed: bool = False

    @classmethod
    def continued(
        cls, path: str, source_format: str, resume: dict[str, Any], problems: list[Problem]
    ) -> ParsedSession:
        """The session of a file read on from a checkpoint (its ``entries`` set by the caller).

        Args:
            path: The file.
            source_format: Its format.
            resume: The earlier read's ``resume`` (``source_id``, ``header``, and
                ``parent_source_id`` where the format has one); copied.
            problems: Where problems of the new lines go (the reader's list).
        """
        return cls(
            path=path,
            source_format=source_format,
            source_version=None,
            source_id=resume["source_id"],
            header=resume["header"],
            parent_source_id=resume.get("parent_source_id"),
            entries=iter(()),
            problems=problems,
            resume=dict(resume),
        )


_SURROGATE = re.compile("[\ud800-\udfff]")

# Keys whose meaning the pi entry fixes; a source field with one of these names (or
# one already set on the entry) is kept under "sourceFields" instead of clobbering it.
RESERVED_KEYS = frozenset({"type", "id", "parentId", "timestamp", "message", "messages"})


def add_extras(entry: dict[str, Any], extras: dict[str, Any]) -> None:
    """Add a source line's fields with no pi equivalent to an entry, losing none.

    A field whose name is taken (a pi key, or one already on the entry) goes into
    ``entry["sourceFields"]`` instead, so the entry's own keys stay right.

    Args:
        entry: The pi entry being built (modified).
        extras: The source fields to keep.
    """
    for key, value in extras.items():
        if key in entry or key in RESERVED_KEYS or key == "sourceFields":
            entry.setdefault("sourceFields", {})[key] = value
        else:
            entry[key] = value


class BoundedMap(OrderedDict[str, str]):
    """A map that forgets its oldest keys past ``limit`` entries (memory stays flat).

    Used for look-backs that only matter nearby: tool-call id -> tool name, API
    message ids already seen.
    """

    def __init__(self, limit: int = 512):
        super().__init__()
        self.limit = limit

    def remember(self, key: str, value: str) -> None:
        """Store ``key``, making it the newest; drop the oldest key past the limit.

        Args:
            key: The key.
            value: Its value.
        """
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


def dumps(value: Any) -> str:
    """Serialize like JavaScript ``JSON.stringify``: compact, non-ASCII kept.

    Args:
        value: Any JSON value.

    Returns:
        The JSON text, without a newline.
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # lone surrogates or integers beyond 64 bits
        pass
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if _SURROGATE.search(text):
        # A lone surrogate (from a "\\ud800" escape) cannot be written as UTF-8;
        # JSON.stringify escapes it, and so do we.
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def source_id_from_name(name: str) -> str:
    """Derive a stable session key from a file name, for files without a header id.

    ``.../abc.jsonl`` gives ``abc``; a ``.reset.<ts>`` leftover keeps its whole
    name, so it never collides with the session that was reset.

    Args:
        name: A path or stream name.

    Returns:
        The key.
    """
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".jsonl", ".ndjson", ".json"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def id_generator(source_id: str) -> Callable[[int], str]:
    """Return a function giving the deterministic 8-hex id of the n-th object of a file.

    The id is ``(h + n) mod 2**32`` in hex, where ``h`` comes from the SHA-256 of
    the source id: the same file gives the same ids on every import (idempotence),
    a longer version of the file keeps the ids of its prefix, and two objects of
    one file never share an id (no set of issued ids is kept: memory stays flat).

    Args:
        source_id: The session's source id.

    Returns:
        A function ``n -> id``.
    """
    base = int.from_bytes(hashlib.sha256(source_id.encode("utf-8", "replace")).digest()[:4])

    def make(n: int) -> str:
        return f"{(base + n) % 2**32:08x}"

    return make


def epoch_to_iso(value: float) -> str:
    """Turn an epoch time in seconds (or milliseconds, if > 1e11) into ISO-8601 UTC.

    The format is JavaScript's ``toISOString`` (milliseconds, ``Z``).

    Args:
        value: Seconds or milliseconds since 1970.

    Returns:
        The ISO string.
    """
    seconds = value / 1000 if abs(value) > 1e11 else value
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_to_epoch_ms(value: str) -> int | None:
    """Parse an ISO-8601 time into epoch milliseconds; None if it is not one.

    Args:
        value: An ISO string (``Z`` or an offset; naive means UTC).

    Returns:
        Milliseconds since 1970, or None.
    """
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, TypeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; JavaScript's JSON.parse rejects them too.
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_WS = re.compile(r"[ \t\n\r]*")
_DECODE_ERRORS = (ValueError, RecursionError)


class LineReader:
    """Iterate over the JSON objects of a binary stream, reporting what it skips.

    Yields ``(line, obj)`` pairs; ``count`` is the number of objects yielded so far
    (the ordinal of the next object), which v1 pi uses as an entry index.
    """

    def __init__(
        self,
        stream: Iterable[bytes],
        path: str,
        problems: list[Problem],
        *,
        strict: bool = False,
        first_line: int = 1,
        count: int = 0,
    ):
        self.path = path
        self.problems = problems
        self.strict = strict
        self.count = count
        self.last_line = first_line - 1  # number of the last line read (blank ones too)
        # A sync that resumes mid-file starts at the line (and object ordinal) after
        # its checkpoint, so problems and generated ids match a whole-file read.
        self._lines = enumerate(stream, first_line)
        self._pending: list[tuple[int, dict[str, Any]]] = []

    def report(self, line: int, kind: str, message: str, *, repaired: bool) -> None:
        """Record a problem, or raise `TranscriptError` in strict mode.

        Args:
            line: 1-based line number.
            kind: The problem tag.
            message: One sentence naming what and where.
            repaired: Whether the line was kept with a repair.

        Raises:
            TranscriptError: In strict mode, always.
        """
        if self.strict:
            raise TranscriptError(message, path=self.path, line=line)
        self.problems.append(Problem(self.path, line, kind, message, repaired))

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        return self

    def __next__(self) -> tuple[int, dict[str, Any]]:
        while not self._pending:
            lineno, raw = next(self._lines)
            self.last_line = lineno
            self._read_line(lineno, raw)
        self.count += 1
        return self._pending.pop(0)

    def _read_line(self, lineno: int, raw: bytes) -> None:
        terminated = raw.endswith(b"\n")
        if not raw.strip():
            return
        if not has_long_number(raw):  # orjson reads >64-bit ints as floats
            try:  # fast path: one well-formed object (orjson refuses everything odd)
                fast = orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass
            else:
                self._accept(lineno, fast)
                return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            text = raw.decode("utf-8", "replace")
            self.report(
                lineno,
                "invalid_utf8",
                f"line {lineno} is not valid UTF-8 (byte {err.start}); "
                "the bad bytes were replaced with U+FFFD",
                repaired=True,
            )
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]  # a byte-order mark is not part of the JSON
        try:
            value = _DECODER.decode(text)
        except _DECODE_ERRORS as err:
            self._split_glued(lineno, text, terminated, err)
            return
        self._accept(lineno, value)

    def _accept(self, lineno: int, value: Any, part: str = "") -> None:
        if isinstance(value, dict):
            self._pending.append((lineno, value))
        else:
            self.report(
                lineno,
                "not_object",
                f"line {lineno}{part} holds a JSON {type(value).__name__}, not an object; skipped",
                repaired=False,
            )

    def _split_glued(self, lineno: int, text: str, terminated: bool, err: Exception) -> None:
        values: list[Any] = []
        end = len(text)
        pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
        error: Exception = err
        while pos < end:
            try:
                value, pos = _DECODER.raw_decode(text, pos)
            except _DECODE_ERRORS as inner:
                error = inner
                break
            values.append(value)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if len(values) > 1:
            count = len(values)
            self.report(
                lineno,
                "glued",
                f"line {lineno} holds {count} JSON value(s) glued together with no newline; "
                "split into separate entries",
                repaired=True,
            )
        for index, value in enumerate(values):
            self._accept(lineno, value, f" (value {index + 1})" if len(values) > 1 else "")
        if pos >= end:
            return
        detail = str(error).split(":")[0] if isinstance(error, json.JSONDecodeError) else str(error)
        where = f" after {len(values)} glued value(s)" if values else ""
        cut = isinstance(error, json.JSONDecodeError) and error.pos >= len(text.rstrip())
        if not terminated or cut:
            self.report(
                lineno,
                "truncated",
                f"line {lineno} is cut off{where} ({detail}); skipped",
                repaired=False,
            )
        else:
            self.report(
                lineno,
                "bad_json",
                f"line {lineno} is not valid JSON{where} ({detail[:120]}); skipped",
                repaired=False,
            )

    def peek(self, limit: int, max_bytes: int = 8_000_000) -> list[tuple[int, dict[str, Any]]]:
        """Read ahead up to ``limit`` objects without consuming them.

        Args:
            limit: Most objects to buffer.
            max_bytes: Stop reading ahead once this many bytes were read (a few
                huge lines must not make the look-ahead big).

        Returns:
            The buffered objects (they are yielded again by iteration).
        """
        read = 0
        while len(self._pending) < limit and read < max_bytes:
            try:
                lineno, raw = next(self._lines)
            except StopIteration:
                break
            read += len(raw)
            self.last_line = lineno
            self._read_line(lineno, raw)
        return list(self._pending[:limit])
