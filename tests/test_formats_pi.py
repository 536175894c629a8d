"""pi / OpenClaw JSONL v1-v3: migration rules, patches, writer, and the quirks."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from nexus_store.errors import TranscriptError
from nexus_store.formats import apply_patch, parse_file, parse_stream, write_pi
from nexus_store.formats.base import id_generator

FIXTURES = Path(__file__).parent / "fixtures" / "jsonl"


def corpus_dir() -> Path:
    here = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
    return here if here.is_dir() else Path("/work/shared/corpus")


def corpus_file(name: str) -> Path:
    path = corpus_dir() / name
    if not path.exists():
        pytest.skip(f"corpus file {name} is absent (../shared/corpus not available)")
    return path


def parse(path: Path) -> tuple[Any, list[Any]]:
    (session,) = parse_file(path)
    return session, list(session.entries)


def parse_bytes(data: bytes, name: str = "mem.jsonl", **kwargs: Any) -> tuple[Any, list[Any]]:
    (session,) = parse_stream(io.BytesIO(data), name, **kwargs)
    return session, list(session.entries)


class TestVersion1:
    def test_ids_are_generated_deterministically_and_chained(self) -> None:
        path = corpus_file("pi/pi-mono__large-session.jsonl")
        session, entries = parse(path)
        assert session.source_version == 1
        assert session.source_id == "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
        make = id_generator(session.source_id)
        assert [e.entry["id"] for e in entries] == [make(n) for n in range(1, len(entries) + 1)]
        assert all(len(e.entry["id"]) == 8 for e in entries)
        assert len({e.entry["id"] for e in entries}) == len(entries)
        assert entries[0].entry["parentId"] is None
        for before, after in itertools.pairwise(entries):
            assert after.entry["parentId"] == before.entry["id"]
        assert all(e.patch is None for e in entries)

    def test_header_keeps_v1_fields(self) -> None:
        session, _ = parse(corpus_file("pi/pi-mono__before-compaction.jsonl"))
        assert session.header["provider"] == "anthropic"
        assert session.header["modelId"] == "claude-opus-4-5"
        assert session.header["thinkingLevel"] == "off"
        assert "version" not in session.header  # as written

    def test_first_kept_index_counts_the_header(self) -> None:
        path = corpus_file("pi/pi-mono__before-compaction.jsonl")
        lines = path.read_bytes().split(b"\n")
        _, entries = parse(path)
        by_line = {e.line: e.entry for e in entries}
        for number, raw in enumerate(lines, 1):
            if b'"type":"compaction"' in raw[:40]:
                index = json.loads(raw)["firstKeptEntryIndex"]
                compaction = by_line[number]
                # no glued line before it: object index N is line N + 1
                assert compaction["firstKeptEntryId"] == by_line[index + 1]["id"]
                assert "firstKeptEntryIndex" not in compaction

    def test_index_pointing_past_the_compaction_is_reported(self) -> None:
        session, entries = parse(corpus_file("pi/pi-mono__compact.jsonl"))
        last = entries[-1].entry
        assert last["type"] == "compaction" and "firstKeptEntryId" not in last
        (problem,) = [p for p in session.problems if p.kind == "bad_reference"]
        assert problem.line == 1013 and problem.repaired

    def test_glued_line_becomes_two_entries_on_the_same_line(self) -> None:
        session, entries = parse(corpus_file("pi/pi-mono__session.jsonl"))
        glued = [e for e in entries if e.line == 440]
        assert [e.entry["message"]["role"] for e in glued] == ["assistant", "user"]
        assert glued[1].entry["parentId"] == glued[0].entry["id"]
        (problem,) = session.problems
        assert (problem.kind, problem.line, problem.repaired) == ("glued", 440, True)

    def test_hook_message_role_becomes_custom(self) -> None:
        data = (
            b'{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}\n'
            b'{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":'
            b'{"role":"hookMessage","customType":"x","content":"c","display":true}}\n'
        )
        _, entries = parse_bytes(data)
        assert entries[0].entry["message"]["role"] == "custom"


class TestVersion2And3:
    def test_v2_hook_message_renamed_and_links_kept(self) -> None:
        session, entries = parse(FIXTURES / "pi-v2-hook.jsonl")
        assert session.source_version == 2
        assert entries[1].entry["message"]["role"] == "custom"
        assert [e.entry["id"] for e in entries] == ["aa000001", "aa000002", "aa000003"]
        assert entries[2].entry["firstKeptEntryId"] == "aa000002"
        assert all(e.patch is None for e in entries)

    def test_v3_keeps_hook_message_as_written(self) -> None:
        data = (
            b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
            b'{"type":"message","id":"a","parentId":null,"timestamp":"t",'
            b'"message":{"role":"hookMessage","content":"c"}}\n'
        )
        _, entries = parse_bytes(data)
        assert entries[0].entry["message"]["role"] == "hookMessage"

    def test_absent_parent_key_is_a_root_with_a_patch(self) -> None:
        _, entries = parse(FIXTURES / "pi-v3-quirks.jsonl")
        first = entries[0]
        assert first.entry["parentId"] is None
        assert first.patch == {"unset": ["parentId"], "set": {}}
        assert "parentId" not in apply_patch(first.entry, first.patch)
        assert entries[1].entry["parentId"] == "q1"  # later entries use it as parent

    def test_numeric_id_is_stringified_and_patched_back(self) -> None:
        _, entries = parse(FIXTURES / "pi-v3-quirks.jsonl")
        label = next(e for e in entries if e.entry["type"] == "label")
        assert label.entry["id"] == "7"
        assert apply_patch(label.entry, label.patch)["id"] == 7

    def test_missing_type_is_unknown_and_reported(self) -> None:
        session, entries = parse(FIXTURES / "pi-v3-quirks.jsonl")
        last = entries[-1]
        assert last.entry["type"] == "unknown"
        assert "type" not in apply_patch(last.entry, last.patch)
        assert [p.kind for p in session.problems] == ["missing_field"]

    def test_retained_tail_and_tool_ids_with_spaces_are_kept(self) -> None:
        _, entries = parse(FIXTURES / "pi-v3-quirks.jsonl")
        compaction = next(e.entry for e in entries if e.entry["type"] == "compaction")
        assert compaction["retainedTail"][0]["toolCallId"] == "  call-with-spaces"
        call = entries[1].entry["message"]["content"][0]
        assert call["id"] == "  call-with-spaces"

    def test_fixture_round_trips_line_for_line(self) -> None:
        path = FIXTURES / "pi-v3-quirks.jsonl"
        session, entries = parse(path)
        out = io.StringIO()
        write_pi(session.header, (apply_patch(e.entry, e.patch) for e in entries), out)
        source = [json.loads(line) for line in path.read_text().splitlines()]
        assert [json.loads(line) for line in out.getvalue().split("\n")[:-1]] == source

    def test_unknown_entry_types_are_kept(self) -> None:
        _, entries = parse(corpus_file("pi-synthetic/agent-sessions-openclaw__schema_drift.jsonl"))
        compact = entries[-1].entry
        assert compact["type"] == "compact" and compact["note"].startswith("legacy")


class TestHeaderless:
    def test_reset_file_gets_a_header_and_keeps_its_foreign_parent(self) -> None:
        path = FIXTURES / "oc-7f3a.jsonl.reset.2026-02-24T10-05-00.000Z"
        session, entries = parse(path)
        assert session.source_format == "pi" and session.source_version == 3
        assert session.source_id == path.name
        assert session.header["type"] == "session" and session.header["id"] == path.name
        assert session.header["timestamp"] == "2026-02-24T10:05:01.000Z"
        assert entries[0].entry["parentId"] == "a9e0c4d2"  # points into another file
        assert len(entries) == 2 and entries[0].patch is None


class TestWriter:
    def test_output_is_compact_like_json_stringify(self) -> None:
        out = io.StringIO()
        header = {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/é"}
        write_pi(header, [{"type": "label", "id": "a", "parentId": None, "label": "ü"}], out)
        assert out.getvalue() == (
            '{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/é"}\n'
            '{"type":"label","id":"a","parentId":null,"label":"ü"}\n'
        )

    def test_multi_message_entry_is_split_and_children_follow_the_last_piece(self) -> None:
        out = io.StringIO()
        entries = [
            {
                "type": "message",
                "id": "u",
                "parentId": None,
                "timestamp": "t",
                "messages": [
                    {"role": "toolResult", "toolCallId": "1"},
                    {"role": "toolResult", "toolCallId": "2"},
                    {"role": "user", "content": "x"},
                ],
            },
            {
                "type": "message",
                "id": "a",
                "parentId": "u",
                "timestamp": "t",
                "message": {"role": "assistant", "content": []},
            },
        ]
        assert write_pi({"type": "session"}, entries, out) == 5
        lines = [json.loads(line) for line in out.getvalue().split("\n")[1:-1]]
        assert [(x["id"], x["parentId"]) for x in lines] == [
            ("u", None),
            ("u.1", "u"),
            ("u.2", "u.1"),
            ("a", "u.2"),
        ]
        assert all("messages" not in x and "message" in x for x in lines)


class TestStrict:
    def test_strict_raises_at_the_first_problem_with_file_and_line(self) -> None:
        path = corpus_file("pi/pi-mono__session.jsonl")
        with pytest.raises(TranscriptError) as caught:
            for session in parse_file(path, strict=True):
                list(session.entries)
        assert caught.value.line == 440 and caught.value.path == str(path)
        assert f"{path}:440:" in str(caught.value)

    def test_unknown_format_name_is_refused(self) -> None:
        with pytest.raises(TranscriptError, match="use one of"):
            list(parse_stream(io.BytesIO(b""), "x", format="yaml"))


def test_lone_surrogate_is_escaped_like_json_stringify() -> None:
    data = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
    data += b'{"type":"label","id":"a","parentId":null,"label":"x\\ud800y"}\n'
    session, entries = parse_bytes(data)
    out = io.StringIO()
    write_pi(session.header, [e.entry for e in entries], out)
    out.getvalue().encode("utf-8")  # writable as UTF-8
    assert (
        out.getvalue().split("\n")[1]
        == '{"type":"label","id":"a","parentId":null,"label":"x\\ud800y"}'
    )
