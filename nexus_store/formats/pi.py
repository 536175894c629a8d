"""pi / OpenClaw session JSONL, versions 1 to 3: reading and writing.

A pi file is a header line (``{"type": "session", "version", "id", "timestamp",
"cwd", ...}``) followed by one entry per line. The versions differ as pi's
``migrateV1ToV2``/``migrateV2ToV3`` (pi-mono session-manager.ts) describe:

* v1 (no ``version``): no ids; file order is the chain; compaction entries keep
  from ``firstKeptEntryIndex``, an index into the file's objects that counts the
  header. We generate deterministic 8-hex ids (`id_generator`, from the object's
  ordinal), chain each entry to the previous one and turn the index into
  ``firstKeptEntryId``. A sync continues a grown v1 file from its checkpoint with
  the previous entry's id (`parse_pi_tail`): the same ids as a whole-file read.
* v2: ``id``/``parentId`` tree; messages may still use role ``hookMessage``.
* v3: role ``hookMessage`` renamed ``custom``.

v1 and v2 are read as v3 (no patch: they export as v3). v3 is read as written; where
an entry had to be normalized (an absent ``parentId`` key, an id that is not a
string, a missing type) the `ParsedEntry` carries a patch so that export gives the
source line back exactly. OpenClaw's ``leaf`` entries (navigation controls: "the
active leaf is now ``targetId``") are stored under their target, as OpenClaw's own
tree places them (their written ``parentId`` is kept in the patch): entries appended
under a control continue from the target, and a session whose last entry is a
control has the target's context. A file with no header (an OpenClaw ``.reset.<ts>``
leftover) gets a synthesized header and keeps its parent links as written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from nexus_store.formats.base import (
    LineReader,
    ParsedEntry,
    ParsedSession,
    dumps,
    id_generator,
    source_id_from_name,
)

__all__ = [
    "apply_patch",
    "parse_pi",
    "parse_pi_tail",
    "read_tree_entries",
    "split_messages",
    "write_pi",
]

CURRENT_VERSION = 3


def apply_patch(entry: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    """Give back the source line's object from a parsed entry and its patch.

    Args:
        entry: A `ParsedEntry.entry` (not modified).
        patch: Its `ParsedEntry.patch`: ``{"unset": [keys], "set": {key: value}}``,
            or None.

    Returns:
        A new dict equal to the source line (or a shallow copy of ``entry``).
    """
    result = dict(entry)
    if not patch:
        return result
    for key in patch.get("unset", ()):
        result.pop(key, None)
    result.update(patch.get("set", {}))
    return result


def _header_of(first: dict[str, Any] | None, path: str) -> tuple[dict[str, Any], bool]:
    if first is not None and first.get("type") == "session":
        return first, True
    header: dict[str, Any] = {
        "type": "session",
        "version": CURRENT_VERSION,
        "id": source_id_from_name(path),
    }
    if first is not None and isinstance(first.get("timestamp"), str):
        header["timestamp"] = first["timestamp"]
    header["cwd"] = ""
    return header, False


def _version_of(header: dict[str, Any], has_header: bool) -> int:
    if not has_header:
        return CURRENT_VERSION
    version = header.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        return 1
    return max(1, min(version, CURRENT_VERSION))


def parse_pi(reader: LineReader) -> ParsedSession:
    """Read a pi / OpenClaw session file.

    Args:
        reader: A `LineReader` over the file.

    Returns:
        The session; its ``entries`` stream lazily.
    """
    ahead = reader.peek(1)
    first = ahead[0][1] if ahead else None
    header, has_header = _header_of(first, reader.path)
    if has_header:
        next(reader)  # the header is not an entry
    return _session(reader, header, _version_of(header, has_header), None)


def parse_pi_tail(reader: LineReader, resume: dict[str, Any]) -> ParsedSession:
    """Read the lines after a checkpoint of a pi file whose start was read before (sync).

    Entries of v2/v3 carry their own ids and parent ids, so the lines after a
    checkpoint read alone give the same entries as a whole-file read. v1 entries
    get ids from their object ordinal and the previous entry as parent: the reader
    starts at the checkpoint's line and object count, and ``resume`` holds the
    previous entry's id, so they match a whole-file read too.

    Args:
        reader: A `LineReader` over the new lines.
        resume: The earlier read's ``resume``: the header (``source_id`` is its
            ``id``) and, for v1, ``previous``.

    Returns:
        The session; its ``entries`` stream lazily.
    """
    header = resume["header"]
    return _session(reader, header, _version_of(header, True), resume.get("previous"))


def _session(
    reader: LineReader, header: dict[str, Any], version: int, previous: str | None
) -> ParsedSession:
    """The session of a pi file (read whole, or from a checkpoint after ``previous``)."""
    raw_id = header.get("id")
    source_id = raw_id if isinstance(raw_id, str) and raw_id else source_id_from_name(reader.path)
    session = ParsedSession(
        path=reader.path,
        source_format="pi",
        source_version=version,
        source_id=source_id,
        header=header,
        parent_source_id=None,
        entries=iter(()),
        problems=reader.problems,
        resume={"header": header},
    )
    if version == 1:
        session.entries = _entries_v1(reader, session, previous)
    else:
        session.entries = _entries_tree(reader, source_id, version)
    return session


def _rename_hook_message(entry: dict[str, Any]) -> None:
    message = entry.get("message")
    if entry.get("type") == "message" and isinstance(message, dict):
        if message.get("role") == "hookMessage":
            entry["message"] = {**message, "role": "custom"}


def _ensure_type(reader: LineReader, line: int, entry: dict[str, Any]) -> bool:
    kind = entry.get("type")
    if isinstance(kind, str) and kind:
        return False
    entry["type"] = "unknown"
    reader.report(
        line,
        "missing_field",
        f"line {line} has no string 'type'; kept as an entry of type 'unknown'",
        repaired=True,
    )
    return True


def _entries_v1(
    reader: LineReader, session: ParsedSession, previous: str | None
) -> Iterator[ParsedEntry]:
    make_id = id_generator(session.source_id)
    for line, obj in reader:
        ordinal = reader.count - 1  # index of this object in the file, header = 0
        entry = dict(obj)
        _ensure_type(reader, line, entry)
        entry["id"] = make_id(ordinal)
        entry["parentId"] = previous
        if entry["type"] == "compaction" and "firstKeptEntryIndex" in entry:
            _resolve_index(reader, line, ordinal, entry, make_id)
        _rename_hook_message(entry)
        previous = entry["id"]
        yield ParsedEntry(line, entry)
    if session.resume is not None:
        session.resume["previous"] = previous  # the parent of the next line's entry


def _resolve_index(
    reader: LineReader,
    line: int,
    ordinal: int,
    entry: dict[str, Any],
    make_id: Callable[[int], str],
) -> None:
    # pi's migrateV1ToV2: entries[firstKeptEntryIndex], the header counting as 0.
    index = entry.pop("firstKeptEntryIndex")
    if isinstance(index, int) and not isinstance(index, bool) and 0 < index < ordinal:
        entry["firstKeptEntryId"] = make_id(index)
        return
    if isinstance(index, int) and not isinstance(index, bool) and index == 0:
        why = "points at the header"
    elif isinstance(index, int) and not isinstance(index, bool):
        why = "points at or past the compaction itself"
    else:
        why = "is not an integer"
    reader.report(
        line,
        "bad_reference",
        f"line {line}: firstKeptEntryIndex {index!r} {why}; "
        "imported without firstKeptEntryId (nothing before the compaction is kept)",
        repaired=True,
    )


def _entries_tree(reader: LineReader, source_id: str, version: int) -> Iterator[ParsedEntry]:
    make_id = id_generator(source_id)
    for line, obj in reader:
        entry = dict(obj)
        unset: list[str] = []
        changed: dict[str, Any] = {}
        if _ensure_type(reader, line, entry):
            _note(obj, "type", unset, changed)
        raw_id = entry.get("id")
        if not isinstance(raw_id, str):
            _note(obj, "id", unset, changed)
            if raw_id is None or isinstance(raw_id, (dict, list, bool)):
                entry["id"] = make_id(reader.count - 1)
                what = "has no id" if raw_id is None else "has an id that is not a string"
                reader.report(
                    line,
                    "missing_field" if raw_id is None else "bad_type",
                    f"line {line} {what}; given the generated id {entry['id']}",
                    repaired=True,
                )
            else:
                entry["id"] = str(raw_id)
        parent = entry.get("parentId")
        if "parentId" not in entry or not (parent is None or isinstance(parent, str)):
            _note(obj, "parentId", unset, changed)
            if isinstance(parent, (int, float)) and not isinstance(parent, bool):
                entry["parentId"] = str(parent)
            else:
                # An absent parentId key makes a root, as pi's `parentId ? ... : undefined`.
                entry["parentId"] = None
        elif entry["type"] == "leaf" and _leaf_target(entry) is not _NO_TARGET:
            # OpenClaw's leaf control selects targetId as the active leaf: in its tree
            # the control hangs under the target, so what is appended under the
            # control continues from the target (transcript-tree.ts).
            target = _leaf_target(entry)
            if target != parent:
                _note(obj, "parentId", unset, changed)
                entry["parentId"] = target
        if version < CURRENT_VERSION:
            _rename_hook_message(entry)
            yield ParsedEntry(line, entry)
        else:
            patch = {"unset": unset, "set": changed} if unset or changed else None
            yield ParsedEntry(line, entry, patch)


_NO_TARGET = object()


def _leaf_target(entry: dict[str, Any]) -> Any:
    """A leaf control's target as OpenClaw parses it.

    An id, None for "before the first entry", or `_NO_TARGET` for a control OpenClaw
    ignores (no id, or a target or append parent that is not an id).
    """
    target = entry.get("targetId", _NO_TARGET)
    if target is None:
        return None
    if not isinstance(target, str) or not target.strip() or not isinstance(entry.get("id"), str):
        return _NO_TARGET
    append = entry.get("appendParentId", target)
    mode = entry.get("appendMode")
    if not (append is None or isinstance(append, str)) or mode not in (None, "side"):
        return _NO_TARGET
    return target


def read_tree_entries(reader: LineReader, source_id: str, version: int) -> Iterator[ParsedEntry]:
    """Read v2/v3 entries (the objects after the header) from any `LineReader`.

    Used by readers of other containers of pi entries (OpenClaw's SQLite store).

    Args:
        reader: Yields ``(line, object)``; its ``count`` is the next object's ordinal.
        source_id: The session id (seeds generated ids).
        version: 2 or 3.

    Yields:
        The entries, with a patch where the object had to be normalized.
    """
    return _entries_tree(reader, source_id, version)


def _note(source: dict[str, Any], key: str, unset: list[str], changed: dict[str, Any]) -> None:
    if key in source:
        changed[key] = source[key]
    else:
        unset.append(key)


def split_messages(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Split a multi-message entry (``"messages": [...]``) into pi message entries.

    The pieces get ids ``<id>``, ``<id>.1``, ... chained by ``parentId``; the first
    keeps the entry's parent. Other keys are copied onto every piece.

    Args:
        entry: A pi entry; one without ``messages`` is returned alone.

    Returns:
        The entries to write, in order.
    """
    messages = entry.get("messages")
    if not isinstance(messages, list):
        return [entry]
    base = {k: v for k, v in entry.items() if k != "messages"}
    pieces: list[dict[str, Any]] = []
    parent = entry.get("parentId")
    for index, message in enumerate(messages):
        piece_id = entry["id"] if index == 0 else f"{entry['id']}.{index}"
        piece = {**base, "type": "message", "id": piece_id, "parentId": parent}
        piece["message"] = message
        pieces.append(piece)
        parent = piece_id
    return pieces


def write_pi(header: dict[str, Any], entries: Iterable[dict[str, Any]], out: TextIO) -> int:
    """Write a pi v3 session file: the header, then one compact JSON object per line.

    Lines are written like JavaScript ``JSON.stringify`` (no spaces, non-ASCII
    kept). A ``messages`` entry is split by `split_messages`; a later entry whose
    parent is such an entry is attached to its last piece, so paths stay whole.

    Args:
        header: The session header (written as given).
        entries: pi entries in an order where parents come first (already patched
            back to their source form by the caller if wanted).
        out: A text stream.

    Returns:
        The number of lines written, header included.
    """
    out.write(dumps(header) + "\n")
    written = 1
    last_piece: dict[str, str] = {}
    for entry in entries:
        parent = entry.get("parentId")
        if isinstance(parent, str) and parent in last_piece:
            entry = {**entry, "parentId": last_piece[parent]}
        pieces = split_messages(entry)
        if len(pieces) > 1:
            last_piece[str(entry["id"])] = pieces[-1]["id"]
        for piece in pieces:
            out.write(dumps(piece) + "\n")
            written += 1
    return written
