"""Property tests: generated v3 sessions round-trip; broken input never escapes as a crash."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store.errors import TranscriptError
from nexus_store.formats import FORMATS, apply_patch, parse_stream, write_pi


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.text(alphabet="0123456789abcdef -", min_size=1, max_size=10)


@st.composite
def v3_entry(draw: st.DrawFn, index: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["message", "compaction", "model_change", "custom", "weird_new"]))
    entry: dict[str, Any] = {"type": kind}
    if draw(st.integers(0, 9)) == 0:
        del entry["type"]  # no type at all
    id_choice = draw(st.integers(0, 9))
    if id_choice == 0:
        pass  # no id
    elif id_choice == 1:
        entry["id"] = index  # a number
    else:
        entry["id"] = draw(ids) + f"-{index}"
    parent_choice = draw(st.integers(0, 5))
    if parent_choice == 1:
        entry["parentId"] = None
    elif parent_choice > 1:
        entry["parentId"] = draw(ids)
    entry["timestamp"] = "2026-01-01T00:00:00.000Z"
    if kind == "message":
        role = draw(st.sampled_from(["user", "assistant", "toolResult", "hookMessage"]))
        content = draw(
            st.text(max_size=30)
            | st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}),
                max_size=3,
            )
        )
        entry["message"] = {"role": role, "content": content, "timestamp": 1}
    elif kind == "compaction":
        entry.update(
            summary=draw(st.text(max_size=30)),
            firstKeptEntryId=draw(ids),
            tokensBefore=draw(st.integers(0, 10**6)),
        )
    extras = draw(
        st.dictionaries(st.sampled_from(["details", "x", "data", "ü"]), json_values, max_size=2)
    )
    entry.update(extras)
    return entry


@st.composite
def v3_session(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header = {"type": "session", "version": 3, "id": draw(ids), "timestamp": "t", "cwd": "/"}
    count = draw(st.integers(0, 12))
    return header, [draw(v3_entry(index)) for index in range(count)]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(v3_session())
def test_generated_v3_sessions_round_trip(
    session: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    header, entries = session
    source = b"".join(compact(x) + b"\n" for x in [header, *entries])
    (parsed,) = parse_stream(io.BytesIO(source), "gen.jsonl")
    got = list(parsed.entries)
    assert len(got) == len(entries)
    for item in got:
        assert isinstance(item.entry["id"], str) and isinstance(item.entry["type"], str)
        assert "parentId" in item.entry
    out = io.StringIO()
    write_pi(parsed.header, (apply_patch(e.entry, e.patch) for e in got), out)
    assert [json.loads(line) for line in out.getvalue().split("\n")[:-1]] == [header, *entries]
    assert all(p.repaired for p in parsed.problems)


def template_lines() -> list[bytes]:
    return [
        b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}',
        b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}',
        b'{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}',
        b'{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":1}',
        b'{"id":"m1","type":"message","role":"user","content":"x","timestamp":1707820000}',
        b'{"id":"c","type":"compaction","summary":"s","boundaryMessageId":"m1","timestamp":1e20}',
        b'{"type":"assistant","uuid":"u","parentUuid":"p","sessionId":"x","message":'
        b'{"id":"m","role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}],'
        b'"usage":{"input_tokens":1}}}',
        b'{"type":"user","uuid":"v","isCompactSummary":true,"message":{"content":[{"type":"text"}]}}',
        b'{"type":"system","subtype":"compact_boundary","logicalParentUuid":"u","compactMetadata":3}',
        b'{"timestamp":"t","type":"response_item","payload":{"type":"function_call",'
        b'"arguments":"{not json","call_id":"c"}}',
        b'{"timestamp":"t","type":"session_meta","payload":{"id":"codex-1"}}',
        b'{"timestamp":"t","type":"compacted","payload":{"message":5}}',
    ]


wrong_types = st.sampled_from(
    [b"5", b'"s"', b"[]", b"{}", b"null", b"true", b"1e400", b'{"a":[1]}']
)


@st.composite
def broken_line(draw: st.DrawFn) -> bytes:
    line = draw(st.sampled_from(template_lines()))
    action = draw(st.integers(0, 7))
    if action == 0:
        return line[: draw(st.integers(0, len(line)))]  # cut off
    if action == 1:
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + line[at:]
    if action == 2:
        return line + draw(st.sampled_from(template_lines()))  # glued
    if action == 3:
        return draw(st.binary(max_size=60))  # random bytes
    if action == 4:
        # a value of the wrong type where a known field is
        key = draw(
            st.sampled_from(
                [
                    b'"message":',
                    b'"content":',
                    b'"payload":',
                    b'"id":',
                    b'"parentId":',
                    b'"type":',
                    b'"usage":',
                    b'"input":',
                ]
            )
        )
        at = line.find(key)
        if at >= 0:
            value_start = at + len(key)
            return line[:value_start] + draw(wrong_types) + b"," + b'"zz":' + line[value_start:]
        return line
    if action == 5:
        return b"[" * draw(st.integers(1, 3000))  # deep nesting
    if action == 6:
        return b'{"x":' + b"9" * 5000 + b"}"  # an integer too long for Python's default limit
    return line


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(broken_line(), max_size=12),
    st.sampled_from([None, *FORMATS]),
    st.booleans(),
)
def test_broken_input_yields_problems_or_transcript_errors_only(
    lines: list[bytes], fmt: str | None, trailing_newline: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    for strict in (False, True):
        try:
            for session in parse_stream(io.BytesIO(data), "fuzz.jsonl", format=fmt, strict=strict):
                for parsed in session.entries:
                    assert isinstance(parsed.entry["type"], str)
                    assert isinstance(parsed.entry["id"], str)
                    assert parsed.entry["parentId"] is None or isinstance(
                        parsed.entry["parentId"], str
                    )
                    json.dumps(parsed.entry, ensure_ascii=False)  # still a JSON value
                if strict:
                    assert session.problems == []
                for problem in session.problems:
                    assert 1 <= problem.line <= max(1, data.count(b"\n") + 1)
                    assert problem.message
        except TranscriptError as err:
            assert strict, f"default mode raised {err}"
            assert err.line is not None and err.path == "fuzz.jsonl"


@pytest.mark.parametrize("fmt", [None, *FORMATS])
def test_huge_line_is_read_whole(fmt: str | None) -> None:
    big = "x" * 3_000_000
    data = compact({"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/"})
    data += (
        b"\n"
        + compact(
            {
                "type": "message",
                "id": "a",
                "parentId": None,
                "message": {"role": "user", "content": big},
            }
        )
        + b"\n"
    )
    (session,) = parse_stream(io.BytesIO(data), "big.jsonl", format=fmt)
    entries = list(session.entries)
    assert entries and session.problems == []


def test_invalid_utf8_is_replaced_and_reported() -> None:
    data = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
    data += b'{"type":"label","id":"a","parentId":null,"label":"caf\xe9"}\n'
    (session,) = parse_stream(io.BytesIO(data), "u.jsonl")
    (entry,) = list(session.entries)
    assert entry.entry["label"] == "caf\ufffd"
    assert [(p.kind, p.line, p.repaired) for p in session.problems] == [("invalid_utf8", 2, True)]
    with pytest.raises(TranscriptError, match="UTF-8"):
        for strict_session in parse_stream(io.BytesIO(data), "u.jsonl", strict=True):
            list(strict_session.entries)


def test_blank_lines_are_skipped_silently() -> None:
    data = b'\n\n{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n  \n\r\n'
    data += b'{"type":"label","id":"a","parentId":null}\n\n'
    (session,) = parse_stream(io.BytesIO(data), "b.jsonl")
    assert [e.line for e in session.entries] == [6] and session.problems == []
