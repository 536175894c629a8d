"""The compaction-event NDJSON of seeds/002: reading it as pi entries, and writing it.

The file has no header and no parent links. Message lines are
``{"id", "type": "message", "role", "content", "timestamp"}`` (epoch seconds);
compaction lines are ``{"id", "type": "compaction", "summary", "messagesCompacted",
"tokensBeforeCompaction", "tokensAfterCompaction", "trigger", "layer",
"customInstruction"?, "boundaryMessageId", "timestamp"}``: messages after the
boundary message are kept.

Reading: entries are chained in file order. A message line becomes a pi message
entry whose ``message`` holds every top-level field but ``id``/``type``/
``timestamp`` (plus ``timestamp`` in epoch ms, as pi messages carry). A compaction
line becomes a pi compaction entry: ``firstKeptEntryId`` is the first message after
the boundary that comes before the compaction (an ancestor); when the boundary is
the last message before it, nothing is kept and the key is absent. The boundary
id stays on the entry (``boundaryMessageId``) so that `write_ndjson` is the exact
inverse. Finding "the message after the boundary" needs the boundary ids first: a
cheap pre-scan collects them (stdin is spooled to a temporary file for that), so
memory holds only those ids.

A sync continues a grown file from its checkpoint (`resume_ndjson`): the reader's
state (the previous entry, the last message, the boundaries already resolved) is kept
in ``resume``, the new bytes are pre-scanned for their own boundaries, and a boundary
that names a message stored before the checkpoint is resolved by a `BoundaryLookup`
over the stored entries. Reading whole or in pieces gives the same entries.

Timestamps: numbers become ISO strings; ``sourceTimestamp`` keeps the original
when the ISO form would not give it back exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, TextIO

from nexus_store.formats.base import (
    LineReader,
    ParsedEntry,
    ParsedSession,
    add_extras,
    dumps,
    epoch_to_iso,
    id_generator,
    iso_to_epoch_ms,
    source_id_from_name,
)
from nexus_store.formats.pi import split_messages

__all__ = [
    "COMPACTION_FIELDS",
    "BoundaryLookup",
    "collect_boundaries",
    "parse_ndjson",
    "resume_ndjson",
    "write_ndjson",
]

# NDJSON field -> pi compaction field.
COMPACTION_FIELDS = {
    "summary": "summary",
    "messagesCompacted": "messagesCompacted",
    "tokensBeforeCompaction": "tokensBefore",
    "tokensAfterCompaction": "tokensAfter",
    "trigger": "trigger",
    "layer": "layer",
    "customInstruction": "customInstruction",
}
_SKIP = {"id", "type", "timestamp"}

BoundaryLookup = Callable[[str], tuple[bool, str | None]]
"""Called with a boundary id when a sync reads the lines after a checkpoint: returns
whether a message entry with that id was stored before the checkpoint, and the id of
the first message entry after it (None if none was stored after it)."""


def collect_boundaries(stream: BinaryIO) -> set[str]:
    """Pre-scan a stream for the ``boundaryMessageId`` values of compaction lines.

    Only lines that mention ``boundaryMessageId`` are decoded. The stream is
    rewound afterwards.

    Args:
        stream: A seekable binary stream.

    Returns:
        The boundary ids.
    """
    start = stream.tell()
    found: set[str] = set()
    for raw in stream:
        if b"boundaryMessageId" not in raw:
            continue
        try:
            text = raw.decode("utf-8", "replace")
            values = [json.loads(text)]
        except ValueError:
            values = _loose_values(text)
        for value in values:
            if isinstance(value, dict) and isinstance(value.get("boundaryMessageId"), str):
                found.add(value["boundaryMessageId"])
    stream.seek(start)
    return found


def _loose_values(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return values
        try:
            value, pos = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            pos = start + 1
            continue
        values.append(value)


def _time(value: Any, entry: dict[str, Any]) -> int | None:
    """Set the entry's ISO timestamp; return the message's epoch ms."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            iso = epoch_to_iso(value)
        except (OverflowError, OSError, ValueError):
            entry["sourceTimestamp"] = value
            return None
        entry["timestamp"] = iso
        if _epoch_back(iso, value) != value or type(_epoch_back(iso, value)) is not type(value):
            entry["sourceTimestamp"] = value
        return iso_to_epoch_ms(iso)
    if isinstance(value, str):
        entry["timestamp"] = value
        return iso_to_epoch_ms(value)
    if value is not None:
        entry["sourceTimestamp"] = value
    return None


def _epoch_back(iso: str, like: float) -> float | None:
    ms = iso_to_epoch_ms(iso)
    if ms is None:
        return None
    if abs(like) > 1e11:
        return ms
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def parse_ndjson(reader: LineReader, boundaries: set[str]) -> ParsedSession:
    """Read a compaction-event NDJSON file.

    Args:
        reader: A `LineReader` over the file.
        boundaries: The ids `collect_boundaries` found.

    Returns:
        The session; its ``entries`` stream lazily.
    """
    source_id = source_id_from_name(reader.path)
    ahead = reader.peek(1)
    header: dict[str, Any] = {"type": "session", "version": 3, "id": source_id}
    if ahead:
        probe: dict[str, Any] = {}
        _time(ahead[0][1].get("timestamp"), probe)
        if "timestamp" in probe:
            header["timestamp"] = probe["timestamp"]
    header["cwd"] = ""
    session = ParsedSession(
        path=reader.path,
        source_format="ndjson",
        source_version=None,
        source_id=source_id,
        header=header,
        parent_source_id=None,
        entries=iter(()),
        problems=reader.problems,
        resume={"source_id": source_id, "header": header},
    )
    session.entries = _entries(reader, session, boundaries, _State(), None)
    return session


def resume_ndjson(
    reader: LineReader,
    resume: dict[str, Any],
    boundaries: set[str],
    lookup: BoundaryLookup | None,
) -> ParsedSession:
    """Read the lines after a checkpoint of an NDJSON file read before (sync).

    Args:
        reader: A `LineReader` over the new lines, starting at the checkpoint's line
            and object count (generated ids depend on it).
        resume: The ``resume`` of the earlier `ParsedSession`.
        boundaries: The boundary ids `collect_boundaries` found in the new lines.
        lookup: Resolves a boundary that names a message stored before the
            checkpoint; None reports such a boundary as not found.

    Returns:
        The session (same source id and header); its ``entries`` stream lazily.
    """
    session = ParsedSession.continued(reader.path, "ndjson", resume, reader.problems)
    state = _State.load(resume.get("state", {}))
    last = state.last_message
    if last is not None and last in boundaries and last not in state.after:
        # The last message before the checkpoint is a boundary only the new lines
        # name: the first message after it is among them.
        state.after[last] = None
        state.waiting.append(last)
    session.entries = _entries(reader, session, boundaries, state, lookup)
    return session


class _State:
    """What reading an NDJSON file carries from one line to the next (kept between syncs)."""

    __slots__ = ("after", "last_message", "previous", "waiting")

    def __init__(self) -> None:
        self.previous: str | None = None  # the previous entry's id: the next one's parent
        self.last_message: str | None = None  # the last message entry's id
        self.after: dict[str, str | None] = {}  # boundary id -> first message after it
        self.waiting: list[str] = []  # boundaries whose next message has not come yet

    def dump(self) -> dict[str, Any]:
        return {
            "previous": self.previous,
            "last_message": self.last_message,
            "after": self.after,
            "waiting": self.waiting,
        }

    @classmethod
    def load(cls, data: dict[str, Any]) -> _State:
        state = cls()
        state.previous = data.get("previous")
        state.last_message = data.get("last_message")
        state.after = dict(data.get("after", {}))
        state.waiting = list(data.get("waiting", []))
        return state


def _entries(
    reader: LineReader,
    session: ParsedSession,
    boundaries: set[str],
    state: _State,
    lookup: BoundaryLookup | None,
) -> Iterator[ParsedEntry]:
    make_id = id_generator(session.source_id)
    after = state.after
    for line, obj in reader:
        raw_id = obj.get("id")
        entry_id = raw_id if isinstance(raw_id, str) else make_id(reader.count - 1)
        kind = obj.get("type")
        entry: dict[str, Any] = {"type": kind if isinstance(kind, str) else "unknown"}
        entry["id"] = entry_id
        entry["parentId"] = state.previous
        if raw_id is not None and not isinstance(raw_id, str):
            entry["sourceId"] = raw_id
        if not isinstance(kind, str):
            reader.report(
                line,
                "missing_field",
                f"line {line} has no string 'type'; kept as an entry of type 'unknown'",
                repaired=True,
            )
        ms = _time(obj.get("timestamp"), entry)
        if kind == "message":
            message = {k: v for k, v in obj.items() if k not in _SKIP}
            if ms is not None:
                message["timestamp"] = ms
            entry["message"] = message
            for boundary in state.waiting:
                after[boundary] = entry_id
            state.waiting = []
            if entry_id in boundaries:
                after[entry_id] = None
                state.waiting.append(entry_id)
            state.last_message = entry_id
        elif kind == "compaction":
            named = obj.get("boundaryMessageId")
            if isinstance(named, str) and named not in after and lookup is not None:
                stored, first_kept = lookup(named)
                if stored:  # a message stored before the checkpoint
                    after[named] = first_kept
            _compaction(reader, line, obj, entry, after)
        else:
            add_extras(entry, {k: v for k, v in obj.items() if k not in _SKIP})
        state.previous = entry_id
        yield ParsedEntry(line, entry)
    if session.resume is not None:
        session.resume["state"] = state.dump()


def _compaction(
    reader: LineReader,
    line: int,
    obj: dict[str, Any],
    entry: dict[str, Any],
    after: dict[str, str | None],
) -> None:
    for source_key, pi_key in COMPACTION_FIELDS.items():
        if source_key in obj:
            entry[pi_key] = obj[source_key]
    boundary = obj.get("boundaryMessageId")
    if isinstance(boundary, str) and boundary in after:
        first_kept = after[boundary]
        if first_kept is not None:
            entry["firstKeptEntryId"] = first_kept
    elif "boundaryMessageId" in obj:
        reader.report(
            line,
            "bad_reference",
            f"line {line}: boundaryMessageId {boundary!r} is not a message before this "
            "compaction; imported without firstKeptEntryId (nothing before it is kept)",
            repaired=True,
        )
    known = set(COMPACTION_FIELDS) | _SKIP
    add_extras(entry, {k: v for k, v in obj.items() if k not in known})


def _source_time(entry: dict[str, Any]) -> Any:
    if "sourceTimestamp" in entry:
        return entry["sourceTimestamp"]
    iso = entry.get("timestamp")
    if not isinstance(iso, str):
        return None
    ms = iso_to_epoch_ms(iso)
    if ms is None:
        return iso
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def write_ndjson(header: dict[str, Any], entries: Iterable[dict[str, Any]], out: TextIO) -> int:
    """Write pi entries as compaction-event NDJSON: the inverse of reading it.

    The format has no header line, so ``header`` is not written. Message entries
    become flat message lines; compaction entries get their NDJSON field names and
    a ``boundaryMessageId`` (kept from import, or the message just before
    ``firstKeptEntryId``, or the last message before the compaction when nothing is
    kept). Other entry types are written with their own fields.

    Args:
        header: The session header (unused by the format; kept for symmetry).
        entries: pi entries, parents first.
        out: A text stream.

    Returns:
        The number of lines written.
    """
    del header
    written = 0
    previous_message: str | None = None
    before: dict[str, str | None] = {}  # message id -> the message written before it
    for entry in entries:
        for piece in split_messages(entry):
            line = _ndjson_line(piece, previous_message, before)
            if piece.get("type") == "message":
                before[str(piece.get("id"))] = previous_message
                previous_message = str(piece.get("id"))
            out.write(dumps(line) + "\n")
            written += 1
    return written


def _ndjson_line(
    entry: dict[str, Any], previous_message: str | None, before: dict[str, str | None]
) -> dict[str, Any]:
    line: dict[str, Any] = {"id": entry.get("sourceId", entry.get("id")), "type": entry["type"]}
    rest = {k: v for k, v in entry.items() if k not in ("id", "type", "parentId", "timestamp")}
    rest.pop("sourceId", None)
    rest.pop("sourceTimestamp", None)
    if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
        message = dict(rest.pop("message"))
        ms = (
            iso_to_epoch_ms(entry["timestamp"]) if isinstance(entry.get("timestamp"), str) else None
        )
        if ms is not None and message.get("timestamp") == ms:
            del message["timestamp"]
        line.update(message)
        line.update(rest)
    elif entry.get("type") == "compaction":
        for source_key, pi_key in COMPACTION_FIELDS.items():
            if pi_key in rest:
                line[source_key] = rest.pop(pi_key)
        first_kept = rest.pop("firstKeptEntryId", None)
        if "boundaryMessageId" not in rest:
            if isinstance(first_kept, str) and first_kept in before:
                rest["boundaryMessageId"] = before[first_kept]
            else:
                rest["boundaryMessageId"] = previous_message
        line.update(rest)
    else:
        line.update(rest)
    stamp = _source_time(entry)
    if stamp is not None:
        line["timestamp"] = stamp
    fields = line.pop("sourceFields", None)
    if isinstance(fields, dict):
        line.update(fields)  # source fields whose names pi entries use
    return line
