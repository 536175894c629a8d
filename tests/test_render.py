"""Provider renderings: OpenAI-compatible chat messages and Anthropic messages."""

from __future__ import annotations

import itertools

import pytest

from nexus_store.render import bash_execution_text, render_messages, to_llm_messages

CONTEXT = [
    {"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 10, "timestamp": 1},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": "QUJD", "mimeType": "image/png"},
        ],
        "timestamp": 2,
    },
    {
        "role": "assistant",
        "timestamp": 3,
        "content": [
            {"type": "thinking", "thinking": "plan it", "thinkingSignature": "sig"},
            {"type": "text", "text": "reading"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
            {"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "b.py"}},
        ],
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "A"}],
        "isError": False,
        "timestamp": 4,
    },
    {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "read",
        "content": [{"type": "text", "text": "no such file"}],
        "isError": True,
        "timestamp": 5,
    },
    {
        "role": "bashExecution",
        "command": "ls",
        "output": "x",
        "exitCode": 2,
        "cancelled": False,
        "truncated": False,
        "timestamp": 6,
    },
    {
        "role": "bashExecution",
        "command": "secret",
        "output": "",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
        "excludeFromContext": True,
        "timestamp": 7,
    },
    {
        "role": "custom",
        "customType": "note",
        "content": "remember",
        "display": True,
        "timestamp": 8,
    },
    {"role": "branchSummary", "summary": "tried X", "fromId": "a", "timestamp": 9},
]


def test_to_llm_follows_pi_convert_to_llm() -> None:
    llm = to_llm_messages(CONTEXT)
    assert [m["role"] for m in llm] == [
        "user",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "user",
        "user",
        "user",
    ]
    assert llm[0]["content"][0]["text"].startswith(
        "The conversation history before this point was compacted"
    )
    assert "<summary>\nearlier work\n</summary>" in llm[0]["content"][0]["text"]
    assert llm[5]["content"][0]["text"] == "Ran `ls`\n```\nx\n```\n\nCommand exited with code 2"
    assert llm[6]["content"] == [{"type": "text", "text": "remember"}]
    assert llm[7]["content"][0]["text"].endswith("tried X</summary>")


def test_bash_text_variants() -> None:
    assert (
        bash_execution_text({"command": "c", "output": "", "cancelled": True})
        == "Ran `c`\n(no output)\n\n(command cancelled)"
    )
    full = bash_execution_text(
        {
            "command": "c",
            "output": "o",
            "exitCode": 0,
            "truncated": True,
            "fullOutputPath": "/tmp/o",
        }
    )
    assert full.endswith("[Output truncated. Full output: /tmp/o]")


def test_openai_shapes() -> None:
    out = render_messages(CONTEXT, "openai")
    assert out[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,QUJD"},
    }
    assistant = out[2]
    assert assistant["content"] == "reading" and "reasoning_content" not in assistant
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["read", "read"]
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "A"}
    assert out[4]["tool_call_id"] == "c2"
    kept = render_messages(CONTEXT, "openai", thinking="keep")
    assert kept[2]["reasoning_content"] == "plan it"


def test_anthropic_shapes() -> None:
    out = render_messages(CONTEXT, "anthropic")
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles))  # roles alternate
    assert [b["type"] for b in out[0]["content"]] == [
        "text",
        "text",
        "image",
    ]  # summary + user, merged
    tool_uses = [b for b in out[1]["content"] if b["type"] == "tool_use"]
    assert [t["input"] for t in tool_uses] == [{"path": "a.py"}, {"path": "b.py"}]
    assert not any(b["type"] == "thinking" for b in out[1]["content"])
    results = [b for b in out[2]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["c1", "c2"] and results[1]["is_error"] is True
    kept = render_messages(CONTEXT, "anthropic", thinking="keep")
    assert kept[1]["content"][0] == {"type": "thinking", "thinking": "plan it", "signature": "sig"}


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="provider"):
        render_messages(CONTEXT, "gemini")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thinking"):
        render_messages(CONTEXT, "openai", thinking="maybe")  # type: ignore[arg-type]
