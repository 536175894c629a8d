"""The compaction-event NDJSON of seeds/002: reading as pi entries and writing back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from nexus_store.formats import detect_format, parse_file, parse_stream, write_ndjson

FIXTURE = Path(__file__).parent / "fixtures" / "jsonl" / "compaction-events.ndjson"


class _Pipe(io.RawIOBase):
    """A non-seekable byte stream, like stdin from a pipe."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def parse(path: Path) -> tuple[Any, list[Any]]:
    (session,) = parse_file(path)
    return session, list(session.entries)


def test_detected_from_content() -> None:
    assert detect_format(FIXTURE.read_bytes().splitlines()[:3]) == "ndjson"


def test_messages_are_chained_linearly_with_iso_times() -> None:
    session, entries = parse(FIXTURE)
    assert session.source_format == "ndjson"
    assert session.source_id == "compaction-events"
    ids = [e.entry["id"] for e in entries]
    assert ids[:3] == ["msg-001", "msg-002", "msg-003"]
    assert [e.entry["parentId"] for e in entries] == [None, *ids[:-1]]
    first = entries[0].entry
    assert first["timestamp"] == "2024-02-13T10:26:40.000Z"
    assert first["message"] == {
        "role": "user",
        "content": "Help me refactor the parser",
        "timestamp": 1707820000000,
    }
    assert entries[3].entry["timestamp"] == "2024-02-13T10:26:43.500Z"
    assert "sourceTimestamp" not in entries[3].entry  # the ISO form gives 1707820003.5 back


def test_compaction_keeps_from_the_message_after_the_boundary() -> None:
    session, entries = parse(FIXTURE)
    first = entries[4].entry
    assert first["type"] == "compaction"
    assert first["firstKeptEntryId"] == "msg-003"
    assert (first["tokensBefore"], first["tokensAfter"]) == (187450, 48320)
    assert (first["trigger"], first["layer"], first["messagesCompacted"]) == (
        "auto",
        "summarize",
        2,
    )
    second = entries[6].entry
    # boundary = the last message before it: nothing before the compaction is kept
    assert "firstKeptEntryId" not in second
    assert second["customInstruction"] == "keep file names"
    assert session.problems == []


def test_unknown_boundary_is_reported() -> None:
    data = (
        b'{"id":"m1","type":"message","role":"user","content":"a","timestamp":1}\n'
        b'{"id":"c1","type":"compaction","summary":"s","boundaryMessageId":"nope","timestamp":2}\n'
    )
    (session,) = parse_stream(io.BytesIO(data), "x.ndjson")
    entries = list(session.entries)
    assert "firstKeptEntryId" not in entries[1].entry
    assert [(p.kind, p.line) for p in session.problems] == [("bad_reference", 2)]


def test_write_ndjson_is_the_exact_inverse() -> None:
    session, entries = parse(FIXTURE)
    out = io.StringIO()
    write_ndjson(session.header, [e.entry for e in entries], out)
    source = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert [json.loads(line) for line in out.getvalue().split("\n")[:-1]] == source


def test_write_ndjson_derives_the_boundary_from_first_kept() -> None:
    entries = [
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "timestamp": "2024-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "x"},
        },
        {
            "type": "message",
            "id": "b",
            "parentId": "a",
            "timestamp": "2024-01-01T00:00:01.000Z",
            "message": {"role": "assistant", "content": "y"},
        },
        {
            "type": "compaction",
            "id": "c",
            "parentId": "b",
            "timestamp": "2024-01-01T00:00:02.000Z",
            "summary": "s",
            "firstKeptEntryId": "b",
            "tokensBefore": 10,
        },
    ]
    out = io.StringIO()
    write_ndjson({}, entries, out)
    lines = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
    assert lines[2]["boundaryMessageId"] == "a"
    assert lines[2]["tokensBeforeCompaction"] == 10
    assert lines[0] == {
        "id": "a",
        "type": "message",
        "role": "user",
        "content": "x",
        "timestamp": 1704067200,
    }
    reparsed = list(next(parse_stream(io.BytesIO(out.getvalue().encode()), "r.ndjson")).entries)
    assert reparsed[2].entry["firstKeptEntryId"] == "b"


def test_stdin_that_cannot_seek_is_spooled_for_the_boundary_scan() -> None:
    stream = io.BufferedReader(_Pipe(FIXTURE.read_bytes()))
    (session,) = parse_stream(stream, "-")
    entries = list(session.entries)
    assert entries[4].entry["firstKeptEntryId"] == "msg-003"
    assert len(entries) == 8
