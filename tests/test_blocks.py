"""Content blocks walked once (nexus_store.blocks) and its readers agreeing on one rule."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store import blocks
from nexus_store.cli.views import message_preview
from nexus_store.compaction.summary_text import FileOps, serialize_conversation
from nexus_store.openai_agents import message_to_items
from nexus_store.render import render_messages
from nexus_store.tokens import CharsEstimator, message_payload, message_tokens

# -- a reference model: what each kind is, written out plainly -------------------------

_texts = st.one_of(st.text(max_size=8), st.integers(), st.none())
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _texts}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _texts}),
    st.fixed_dictionaries(
        {
            "type": st.just("toolCall"),
            "id": st.text(max_size=4),
            "name": st.text(max_size=4),
            "arguments": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        }
    ),
    st.fixed_dictionaries({"type": st.just("image"), "data": st.text(max_size=4)}),
    st.fixed_dictionaries({"type": st.sampled_from(["audio", "", "Text"])}),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),  # no type at all
    st.integers(),
    st.text(max_size=3),  # not blocks
)
_content = st.one_of(st.text(max_size=8), st.lists(_block, max_size=6), st.none(), st.integers())


def _reference_kind(block: dict[str, Any]) -> str:
    t = block.get("type")
    if t == "text" and type(block.get("text")) is str:
        return "text"
    if t == "thinking" and type(block.get("thinking")) is str:
        return "thinking"
    return t if t in ("toolCall", "image") else "unknown"


class TestWalk:
    @settings(max_examples=300, deadline=None)
    @given(_content)
    def test_every_reader_agrees_with_the_reference(self, content: Any) -> None:
        if isinstance(content, str):
            expected = [("text", {"type": "text", "text": content})]
        elif isinstance(content, list):
            expected = [(_reference_kind(b), b) for b in content if isinstance(b, dict)]
        else:
            expected = []
        assert list(blocks.iter_blocks(content)) == expected
        assert blocks.content_blocks(content) == [b for _, b in expected]
        texts = [b["text"] for k, b in expected if k == "text"]
        assert blocks.texts(content) == texts
        if isinstance(content, str):
            assert blocks.texts(content, nonempty=True) == [content]  # kept even when empty
            assert blocks.flatten_text(content) == content
        else:
            assert blocks.texts(content, nonempty=True) == [t for t in texts if t]
            assert blocks.flatten_text(content) == ("\n".join(texts) if texts else None)
            assert blocks.tool_calls(content) == [b for k, b in expected if k == "toolCall"]
            assert blocks.images(content) == [b for k, b in expected if k == "image"]
            assert blocks.count_images(content) == len(blocks.images(content))
        assert blocks.content_text(content, sep="|") == "|".join(texts)
        thinking = [b["thinking"] for k, b in expected if k == "thinking"]
        assert blocks.thinking_texts(content) == thinking

    def test_a_string_has_no_tool_calls_images_or_thinking(self) -> None:
        assert blocks.tool_calls("call read") == []
        assert blocks.images("an image") == []
        assert blocks.thinking_texts("hmm") == []

    def test_text_that_is_not_a_string_is_not_text(self) -> None:
        content = [{"type": "text", "text": 5}, {"type": "thinking", "thinking": None}]
        assert [k for k, _ in blocks.iter_blocks(content)] == ["unknown", "unknown"]
        assert blocks.flatten_text(content) is None


class TestReadersUseTheOneRule:
    message = {  # noqa: RUF012 - read only
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan"},
            {"type": "text", "text": "Reading."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
            {"type": "mystery", "text": "not text"},
        ],
    }

    def test_tokens_count_text_thinking_and_calls(self) -> None:
        texts, images = message_payload(self.message)
        assert texts == ["plan", "Reading.", "read", '{"path":"a.py"}'] and images == 0
        assert message_tokens(CharsEstimator(), {"role": "assistant", "content": "x" * 40}) == 0

    def test_tokens_count_tool_result_images(self) -> None:
        result = {
            "role": "toolResult",
            "content": [{"type": "text", "text": ""}, {"type": "image", "data": "x"}, "junk"],
        }
        assert message_payload(result) == ([], 1)
        assert message_payload({"role": "user", "content": ""}) == ([""], 0)

    def test_render_skips_unknown_blocks(self) -> None:
        rendered = render_messages([self.message], "anthropic", thinking="keep")
        kinds = [b["type"] for b in rendered[0]["content"]]
        assert kinds == ["thinking", "text", "tool_use"]
        openai = render_messages([self.message], "openai")
        assert openai[0]["content"] == "Reading."
        assert [c["function"]["name"] for c in openai[0]["tool_calls"]] == ["read"]

    def test_summaries_views_and_sdk_read_the_same_blocks(self) -> None:
        text = serialize_conversation([self.message])
        assert "[Assistant thinking]: plan" in text and "not text" not in text
        assert "[Assistant tool calls]: read(path=" in text
        ops = FileOps()
        ops.add_message(self.message)
        ops.add_message({"role": "user", "content": self.message["content"]})  # not a call
        assert list(ops.read) == ["a.py"]
        assert message_preview(self.message) == "assistant: Reading. [calls read]"
        items = message_to_items(self.message)
        assert [i.get("type", i.get("role")) for i in items] == ["assistant", "function_call"]
