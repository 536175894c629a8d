"""Claude Code and Codex transcripts read as pi v3 entries."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nexus_store.formats import parse_file

FIXTURES = Path(__file__).parent / "fixtures" / "jsonl"


def corpus_file(name: str) -> Path:
    root = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
    path = (root if root.is_dir() else Path("/work/shared/corpus")) / name
    if not path.exists():
        pytest.skip(f"corpus file {name} is absent (../shared/corpus not available)")
    return path


def parse(path: Path) -> tuple[Any, dict[int, list[dict[str, Any]]]]:
    (session,) = parse_file(path)
    by_line: dict[int, list[dict[str, Any]]] = {}
    for parsed in session.entries:
        by_line.setdefault(parsed.line, []).append(parsed.entry)
    return session, by_line


class TestClaudeCodeMessages:
    def test_header_is_synthesized_from_the_records(self) -> None:
        session, _ = parse(FIXTURES / "claude-code-parallel.jsonl")
        assert session.source_format == "claude_code"
        assert session.source_id == "cc-par-1" and session.parent_source_id is None
        assert session.header["type"] == "session" and session.header["cwd"] == "/repo"

    def test_blocks_map_to_pi_blocks(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        user = lines[2][0]["message"]
        image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        assert user["content"][1] == image
        thinking = lines[3][0]["message"]["content"][0]
        assert thinking == {"type": "thinking", "thinking": "two files", "thinkingSignature": "sig"}
        calls = lines[4][0]["message"]["content"]
        assert [(c["type"], c["id"], c["arguments"]) for c in calls] == [
            ("toolCall", "toolu_1", {"file_path": "a"}),
            ("toolCall", "toolu_2", {"pattern": "b"}),
        ]
        assert lines[4][0]["message"]["stopReason"] == "toolUse"

    def test_split_response_counts_usage_once(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        first, second = lines[3][0], lines[4][0]
        assert first["message"]["usage"] == {
            "input": 100,
            "output": 20,
            "cacheRead": 5,
            "cacheWrite": 7,
            "totalTokens": 132,
        }
        assert "usage" not in second["message"]
        assert second["ccMessage"]["usage"]["input_tokens"] == 100  # kept, not counted

    def test_split_responses_in_a_real_session_carry_usage_once_per_message_id(self) -> None:
        path = corpus_file(
            "claude-code/claude-code-log-fork-iansherr__03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"
        )
        _, lines = parse(path)
        with_usage: Counter[str] = Counter()
        pieces: Counter[str] = Counter()
        for entries in lines.values():
            for entry in entries:
                message = entry.get("message")
                if isinstance(message, dict) and message.get("role") == "assistant":
                    pieces[entry["ccMessage"]["id"]] += 1
                    with_usage[entry["ccMessage"]["id"]] += "usage" in message
        assert max(pieces.values()) > 1  # the file does split responses
        assert set(with_usage.values()) == {1}

    def test_several_tool_results_become_several_messages(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        entry = lines[5][0]
        assert "message" not in entry
        roles = [
            (m["role"], m.get("toolCallId"), m.get("toolName"), m.get("isError"))
            for m in entry["messages"]
        ]
        assert roles == [
            ("toolResult", "toolu_1", "Read", False),
            ("toolResult", "toolu_2", "Grep", True),
            ("user", None, None, None),
        ]
        assert entry["toolUseResult"] == {"ok": True}  # extra fields stay on the entry

    def test_compact_boundary_links_to_its_logical_parent(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        boundary = lines[6][0]
        assert boundary["type"] == "system" and boundary["parentId"] == "u2"
        assert boundary["parentUuid"] is None  # the written value is kept

    def test_compact_summary_record_becomes_a_compaction(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        compaction = lines[7][0]
        assert compaction["type"] == "compaction" and compaction["parentId"] == "b1"
        assert compaction["summary"].endswith("read a and b.")
        assert compaction["tokensBefore"] == 54321 and compaction["trigger"] == "manual"
        assert "firstKeptEntryId" not in compaction
        assert lines[8][0]["parentId"] == "u3"

    def test_metadata_lines_keep_their_type_with_generated_ids(self) -> None:
        _, lines = parse(FIXTURES / "claude-code-parallel.jsonl")
        summary, title = lines[1][0], lines[9][0]
        assert (summary["type"], summary["parentId"]) == ("summary", None)
        assert (title["type"], title["parentId"]) == ("custom-title", "u4")
        assert len(summary["id"]) == 8 and summary["id"] != title["id"]
        _, again = parse(FIXTURES / "claude-code-parallel.jsonl")
        assert again[1][0]["id"] == summary["id"]

    def test_summary_only_file_is_one_entry(self) -> None:
        path = corpus_file("claude-code/sniffly__ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl")
        session, lines = parse(path)
        assert [e["type"] for es in lines.values() for e in es] == ["summary"]
        assert session.source_id == path.stem and session.problems == []

    def test_sub_agent_file_names_its_parent_session(self) -> None:
        path = corpus_file(
            "claude-code/claude-code-log-fork-iansherr__ef958aa1_subagents_agent-a4ca7529859c158c2.jsonl"
        )
        session, _ = parse(path)
        assert session.parent_source_id == "ef958aa1-0e93-49f0-bb71-150f63befcd1"
        assert session.source_id == "ef958aa1-0e93-49f0-bb71-150f63befcd1/agent-a4ca7529859c158c2"

    def test_main_file_with_inline_sidechains_is_not_a_sub_agent(self) -> None:
        path = corpus_file("claude-code-synthetic/agent-sessions-claude__small.jsonl")
        session, lines = parse(path)
        assert session.parent_source_id is None and session.source_id == "ses_stage0_small"
        compaction = lines[22][0]
        assert compaction["type"] == "compaction" and compaction["tokensBefore"] == 120000

    def test_wrong_message_type_is_kept_and_reported(self) -> None:
        path = corpus_file("claude-code-synthetic/claude-code-log__edge_cases.jsonl")
        session, lines = parse(path)
        entry = lines[11][0]
        assert entry["type"] == "user" and entry["ccMessage"] == "error"
        assert ("bad_type", 11, True) in [(p.kind, p.line, p.repaired) for p in session.problems]

    def test_truncated_last_line_is_reported(self) -> None:
        session, lines = parse(corpus_file("claude-code-synthetic/agentsview__truncated.jsonl"))
        assert sorted(lines) == [1, 2]
        assert [(p.kind, p.line, p.repaired) for p in session.problems] == [("truncated", 3, False)]


class TestCodex:
    def test_function_call_arguments_are_parsed(self) -> None:
        path = corpus_file("codex/claude-code-log-fork-iansherr__sample-session.jsonl")
        _session, lines = parse(path)
        call = lines[6][0]["message"]
        assert call["role"] == "assistant"
        assert call["content"][0] == {
            "type": "toolCall",
            "id": "call_001",
            "name": "exec_command",
            "arguments": {"command": "ls -la"},
        }
        result = lines[7][0]["message"]
        assert (result["role"], result["toolCallId"], result["toolName"]) == (
            "toolResult",
            "call_001",
            "exec_command",
        )
        assert result["content"][0]["text"].startswith("total 32")
        developer = lines[3][0]["message"]
        assert developer["role"] == "custom" and developer["customType"] == "codex.developer"
        assert lines[2][0]["type"] == "turn_context" and lines[5][0]["type"] == "event_msg"

    def test_entries_are_linear_and_the_first_meta_is_the_header(self) -> None:
        path = corpus_file("codex/agent-sessions-codex__small.jsonl")
        session, lines = parse(path)
        assert session.source_id == "019fc8be-3658-7ca3-9e29-000000000000"
        assert session.header["cwd"] == "/tmp/repo" and 1 not in lines
        entries = [e for es in lines.values() for e in es]
        assert entries[0]["parentId"] is None
        assert all(b["parentId"] == a["id"] for a, b in itertools.pairwise(entries))
        kinds = Counter(e["type"] for e in entries)
        assert kinds["compaction"] == 6 and kinds["session_meta"] == 6
        reasoning = lines[7][0]["message"]["content"][0]
        assert reasoning["type"] == "thinking"

    def test_file_without_session_meta_takes_its_id_from_the_name(self) -> None:
        path = corpus_file("codex/ccusage__session-alpha.jsonl")
        session, lines = parse(path)
        assert session.source_id == "ccusage__session-alpha" and len(lines) == 3


def test_records_without_parent_key_chain_to_the_previous_record_not_metadata() -> None:
    path = corpus_file("claude-code-synthetic/claude-code-transcripts__sample_session.jsonl")
    _, lines = parse(path)
    entries = [e for es in lines.values() for e in es]
    assert entries[0]["type"] == "summary" and entries[1]["id"] == "msg-001"
    assert entries[1]["parentId"] is None  # a root, not a child of the summary line
    assert [e["parentId"] for e in entries[2:]] == [f"msg-00{n}" for n in range(1, 7)]


def test_non_seekable_stream_is_detected_and_read_in_one_pass() -> None:
    import io

    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def readinto(self, buffer: Any) -> int:
            chunk = self._data.read(len(buffer))
            buffer[: len(chunk)] = chunk
            return len(chunk)

    from nexus_store.formats import parse_stream

    data = (FIXTURES / "claude-code-parallel.jsonl").read_bytes()
    (session,) = parse_stream(io.BufferedReader(Pipe(data)), "-")
    assert session.source_format == "claude_code" and session.source_id == "cc-par-1"
    assert [e.line for e in session.entries] == list(range(1, 10))


def test_parse_file_closes_the_file_when_entries_are_consumed(monkeypatch: Any) -> None:
    import builtins

    opened: list[Any] = []
    real_open = builtins.open

    def spy(*args: Any, **kwargs: Any) -> Any:
        handle = real_open(*args, **kwargs)
        opened.append(handle)
        return handle

    monkeypatch.setattr(builtins, "open", spy)
    sessions = list(parse_file(FIXTURES / "claude-code-parallel.jsonl"))
    assert len(list(sessions[0].entries)) == 9  # still readable after the generator ended
    assert opened and all(handle.closed for handle in opened)
