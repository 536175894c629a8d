from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store.compaction.extractive import ExtractiveSummarizer
from nexus_store.compaction.plan import (
    BRANCH_SUMMARY_INSTRUCTIONS,
    BRANCH_SUMMARY_PREAMBLE,
    TURN_PREFIX_INSTRUCTIONS,
    ContextItem,
    find_cut_points,
    plan_compaction,
    run_branch_summary,
    run_compaction,
)
from nexus_store.compaction.policy import CompactionConfig
from nexus_store.errors import NexusError, SummarizerError
from nexus_store.tokens import CharsEstimator

CFG = CompactionConfig()
COUNTER = CharsEstimator()


class Builder:
    """Builds a context: one turn per message unless told otherwise."""

    def __init__(self) -> None:
        self.items: list[ContextItem] = []
        self.n = 0

    def add(
        self,
        message: dict[str, Any],
        tokens: int,
        *,
        turn: str | None = None,
        kind: str = "message",
    ) -> str:
        self.n += 1
        turn_id = turn or f"t{self.n}"
        self.items.append(ContextItem(turn_id=turn_id, kind=kind, message=message, tokens=tokens))
        return turn_id

    def user(self, text: str, tokens: int = 10) -> str:
        return self.add({"role": "user", "content": text}, tokens)

    def call(self, cid: str, name: str = "bash", tokens: int = 10, **args: Any) -> str:
        block = {"type": "toolCall", "id": cid, "name": name, "arguments": args}
        return self.add({"role": "assistant", "content": [block]}, tokens)

    def result(self, cid: str, tokens: int, name: str = "bash") -> str:
        message = {
            "role": "toolResult",
            "toolCallId": cid,
            "toolName": name,
            "content": [{"type": "text", "text": f"result of {cid}"}],
            "isError": False,
        }
        return self.add(message, tokens)

    def say(self, text: str, tokens: int = 10) -> str:
        return self.add({"role": "assistant", "content": [{"type": "text", "text": text}]}, tokens)

    def summary(self, text: str, tokens: int = 50) -> str:
        message = {"role": "compactionSummary", "summary": text, "tokensBefore": 999}
        return self.add(message, tokens, kind="compaction")


def ids(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        if m["role"] == "toolResult":
            out.append(f"R:{m['toolCallId']}")
        elif m["role"] == "user":
            out.append(f"U:{m['content']}")
        else:
            out.append(m["role"])
    return out


class TestPlan:
    def test_nothing_to_compact_when_everything_fits(self) -> None:
        b = Builder()
        first = b.user("a")
        b.say("b")
        plan = plan_compaction(b.items, keep_recent_tokens=1000)
        assert plan.is_empty and plan.first_kept_turn_id == first
        assert plan.estimated_tokens_after == plan.tokens_before == 20
        with pytest.raises(NexusError, match="nothing to compact"):
            run_compaction(plan, ExtractiveSummarizer(), COUNTER, CFG)

    def test_cut_at_user_message_keeps_recent_tokens(self) -> None:
        b = Builder()
        b.user("one", 100)
        b.say("r1", 100)
        keep = b.user("two", 100)
        b.say("r2", 100)
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        assert plan.first_kept_turn_id == keep
        assert not plan.is_split_turn and plan.split_turn_prefix == []
        assert ids(plan.to_summarize) == ["U:one", "assistant"]
        assert plan.tokens_before == 400 and plan.tokens_kept == 200
        assert plan.messages_compacted == 2
        assert plan.estimated_tokens_after == 200 + 200  # kept + min(folded, estimate)

    def test_keep_budget_boundary(self) -> None:
        b = Builder()
        b.user("one", 100)
        b.say("r1", 100)
        two = b.user("two", 100)
        b.say("r2", 99)
        # 199 recent tokens < 200: the walk continues past "two" to "r1" (an assistant)
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        assert plan.first_kept_turn_id != two and plan.is_split_turn
        plan = plan_compaction(b.items, keep_recent_tokens=199)
        assert plan.first_kept_turn_id == two and not plan.is_split_turn

    def test_never_cuts_between_tool_call_and_results(self) -> None:
        b = Builder()
        b.user("go", 10)
        call = b.call("c1", tokens=10)
        b.result("c1", 500)
        b.result("c1b", 500)
        plan = plan_compaction(b.items, keep_recent_tokens=400)
        # the walk reaches the budget inside the results: the cut moves back to the call
        assert plan.first_kept_turn_id == call
        assert plan.is_split_turn and ids(plan.split_turn_prefix) == ["U:go"]
        assert plan.to_summarize == []

    def test_split_turn_prefix_is_separate(self) -> None:
        b = Builder()
        b.user("old", 50)
        b.say("old reply", 50)
        b.user("big task", 10)
        b.call("c1", tokens=10)
        b.result("c1", 300)
        kept = b.call("c2", tokens=10)
        b.result("c2", 300)
        plan = plan_compaction(b.items, keep_recent_tokens=300)
        assert plan.first_kept_turn_id == kept
        assert plan.is_split_turn
        assert ids(plan.to_summarize) == ["U:old", "assistant"]
        assert ids(plan.split_turn_prefix) == ["U:big task", "assistant", "R:c1"]
        assert plan.messages_compacted == 5

    def test_window_starts_after_previous_summary_and_includes_its_kept_turns(self) -> None:
        # pi #2608: turns kept by the previous compaction must be summarized by the next one
        b = Builder()
        b.summary("EARLIER SUMMARY")
        b.user("kept by previous compaction", 100)
        b.say("kept reply", 100)
        new = b.user("newest", 100)
        b.say("newest reply", 100)
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        assert plan.previous_summary == "EARLIER SUMMARY"
        assert ids(plan.to_summarize) == ["U:kept by previous compaction", "assistant"]
        assert plan.first_kept_turn_id == new
        assert plan.tokens_before == 450
        assert "compactionSummary" not in ids(plan.to_summarize)

    def test_explicit_previous_summary_wins(self) -> None:
        b = Builder()
        b.summary("from context")
        b.user("x", 10)
        plan = plan_compaction(b.items, keep_recent_tokens=0, previous_summary="explicit")
        assert plan.previous_summary == "explicit"

    def test_never_cuts_inside_a_multi_message_turn(self) -> None:
        b = Builder()
        b.user("first", 100)
        b.add({"role": "user", "content": "batch"}, 100, turn="T")
        b.add({"role": "assistant", "content": [{"type": "text", "text": "a"}]}, 100, turn="T")
        b.add({"role": "assistant", "content": [{"type": "text", "text": "b"}]}, 100, turn="T")
        plan = plan_compaction(b.items, keep_recent_tokens=150)
        assert plan.first_kept_turn_id == "T"
        assert ids(plan.to_summarize) == ["U:first"]
        assert find_cut_points(b.items, 0, len(b.items)) == [0, 1]

    def test_negative_keep_is_an_error(self) -> None:
        with pytest.raises(NexusError):
            plan_compaction([], keep_recent_tokens=-1)

    def test_empty_context(self) -> None:
        plan = plan_compaction([], keep_recent_tokens=10)
        assert plan.is_empty and plan.first_kept_turn_id is None


# -- property: cuts are always valid --------------------------------------------------------


@st.composite
def contexts(draw: st.DrawFn) -> list[ContextItem]:
    b = Builder()
    if draw(st.booleans()):
        b.summary("prev", draw(st.integers(0, 500)))
    for t in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "user", "bash", "custom"]))
        if kind == "user":
            b.user(f"u{t}", draw(st.integers(0, 300)))
        elif kind == "bash":
            b.add(
                {"role": "bashExecution", "command": "ls", "output": "x"}, draw(st.integers(0, 300))
            )
        else:
            b.add(
                {"role": "custom", "customType": "x", "content": "n"},
                draw(st.integers(0, 50)),
                kind="custom_message",
            )
        for k in range(draw(st.integers(0, 3))):
            cid = f"c{t}_{k}"
            b.call(cid, tokens=draw(st.integers(0, 100)))
            for _ in range(draw(st.integers(1, 2))):  # a call may have several results
                b.result(cid, draw(st.integers(0, 2000)))
        if draw(st.booleans()):
            b.say("done", draw(st.integers(0, 200)))
    return b.items


class TestPlanProperties:
    @settings(max_examples=400, deadline=None)
    @given(contexts(), st.integers(0, 5000))
    def test_plan_is_valid(self, items: list[ContextItem], keep: int) -> None:
        plan = plan_compaction(items, keep_recent_tokens=keep)
        start = 1 if items and items[0].message["role"] == "compactionSummary" else 0
        window = items[start:]
        assert plan.tokens_before == sum(i.tokens for i in items)
        if plan.is_empty:
            return
        cut = next(i for i, item in enumerate(window) if item.turn_id == plan.first_kept_turn_id)
        kept = window[cut:]
        # the kept part never starts with a tool result
        assert kept[0].message["role"] != "toolResult"
        # summarized + prefix + kept == the window, in order, nothing lost or duplicated
        assert [*plan.to_summarize, *plan.split_turn_prefix] == [i.message for i in window[:cut]]
        # every kept tool result has its call kept too
        kept_calls = {
            block["id"]
            for item in kept
            if item.message["role"] == "assistant"
            for block in item.message["content"]
            if block.get("type") == "toolCall"
        }
        for item in kept:
            if item.message["role"] == "toolResult":
                assert item.message["toolCallId"] in kept_calls
        # about keep_recent_tokens are kept: less only when the budget line falls inside
        # a stretch that cannot be cut (a call's results), and then the previous valid cut
        # point would have kept at least the budget (pi's findCutPoint behaves the same)
        assert plan.tokens_kept == sum(i.tokens for i in kept)
        if plan.tokens_kept < keep:
            points = [p - start for p in find_cut_points(items, start, len(items))]
            previous = max(p for p in points if p < cut)
            assert sum(i.tokens for i in window[previous:]) >= keep
            assert window[cut - 1].message["role"] == "toolResult"
        # the cut is the latest valid point that keeps the budget, never an earlier one
        later = [p - start for p in find_cut_points(items, start, len(items)) if p - start > cut]
        for p in later:
            assert sum(i.tokens for i in window[p:]) < keep
        # a split turn's prefix starts a turn
        if plan.is_split_turn:
            assert plan.split_turn_prefix[0]["role"] in ("user", "bashExecution", "custom")
            assert kept[0].message["role"] == "assistant"


# -- running a compaction --------------------------------------------------------------------


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = 4096,
    ) -> str:
        self.calls.append(
            {"messages": list(messages), "previous": previous_summary, "instructions": instructions}
        )
        if self.fail:
            raise SummarizerError("model down", status_code=503)
        return f"SUMMARY{len(self.calls)}"

    def merge(self, summaries: Sequence[str], *, instructions: str | None = None) -> str:
        raise AssertionError("no merge expected")


def coding_session() -> Builder:
    b = Builder()
    b.summary("## Goal\n- Earlier goal\n\n<read-files>\nold_read.py\n</read-files>")
    b.user("Add caching to the API client", 100)
    b.call("r1", "read", 20, path="src/client.py")
    b.result("r1", 400, name="read")
    b.call("w1", "edit", 20, path="src/client.py")
    b.result("w1", 30, name="edit")
    b.user("Now write tests", 100)
    b.call("w2", "write", 20, path="tests/test_client.py")
    b.result("w2", 30, name="write")
    b.say("Tests written; next I'll run them.", 100)
    return b


class TestRunCompaction:
    def test_extractive_summary_with_file_details(self) -> None:
        b = coding_session()
        plan = plan_compaction(
            b.items,
            keep_recent_tokens=200,
            previous_details={"readFiles": ["docs/a.md"], "modifiedFiles": ["x.py"]},
        )
        assert plan.first_kept_turn_id is not None and not plan.is_empty
        out = run_compaction(plan, ExtractiveSummarizer(), COUNTER, CFG)
        assert out.details == {
            "readFiles": ["docs/a.md"],
            "modifiedFiles": ["src/client.py", "x.py"],
        }
        assert "Earlier goal" in out.summary  # the previous summary is updated, not dropped
        assert "Add caching to the API client" in out.summary
        assert out.summary.endswith("<modified-files>\nsrc/client.py\nx.py\n</modified-files>")
        assert out.summary.count("<read-files>") == 1
        assert "old_read.py" not in out.details["readFiles"]  # only details carry files forward
        assert out.tokens_after is not None and out.tokens_after < plan.tokens_before
        assert out.layer == "summarize" and not out.partial

    def test_previous_summary_passed_without_file_blocks(self) -> None:
        b = coding_session()
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        rec = Recorder()
        run_compaction(plan, rec, COUNTER, CFG, instructions="caching")
        assert rec.calls[0]["previous"] == "## Goal\n- Earlier goal"
        assert rec.calls[0]["instructions"] == "caching"

    def test_split_turn_summarizes_prefix_separately(self) -> None:
        b = Builder()
        b.user("old", 50)
        b.say("old reply", 50)
        b.user("big task", 10)
        b.call("c1", "read", 10, path="big.txt")
        b.result("c1", 300, name="read")
        b.call("c2", tokens=10)
        b.result("c2", 300)
        plan = plan_compaction(b.items, keep_recent_tokens=300)
        assert plan.is_split_turn
        rec = Recorder()
        out = run_compaction(plan, rec, COUNTER, CFG)
        assert len(rec.calls) == 2
        assert ids(rec.calls[0]["messages"]) == ["U:old", "assistant"]
        assert ids(rec.calls[1]["messages"]) == ["U:big task", "assistant", "R:c1"]
        assert rec.calls[1]["instructions"] == TURN_PREFIX_INSTRUCTIONS
        assert rec.calls[1]["previous"] is None
        assert out.summary.startswith(
            "SUMMARY1\n\n---\n\n**Turn context (split turn):**\n\nSUMMARY2"
        )
        assert out.details["readFiles"] == ["big.txt"]
        assert out.stages == 2

    def test_prune_layer_never_calls_the_summarizer(self) -> None:
        b = coding_session()
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        rec = Recorder(fail=True)
        out = run_compaction(plan, rec, COUNTER, CFG, layer="prune")
        assert rec.calls == []
        assert out.layer == "prune"
        assert out.summary.startswith("[Mechanical compaction (prune layer, no LLM):")
        assert "Earlier goal" in out.summary and "Add caching to the API client" in out.summary
        assert "<modified-files>" in out.summary

    def test_summarizer_failure_raises(self) -> None:
        b = coding_session()
        plan = plan_compaction(b.items, keep_recent_tokens=200)
        with pytest.raises(SummarizerError, match="model down"):
            run_compaction(plan, Recorder(fail=True), COUNTER, CFG)

    def test_tokens_after_discarded_when_not_smaller(self) -> None:
        b = Builder()
        b.user("tiny", 1)
        b.user("also tiny", 1)
        plan = plan_compaction(b.items, keep_recent_tokens=1)
        out = run_compaction(plan, ExtractiveSummarizer(), COUNTER, CFG)
        assert out.tokens_after is None  # a summary bigger than what it replaced


class TestBranchSummary:
    def branch(self) -> list[dict[str, Any]]:
        return [item.message for item in coding_session().items[1:]]

    def test_summarizes_branch_without_tool_results(self) -> None:
        rec = Recorder()
        out = run_branch_summary(
            self.branch(),
            rec,
            COUNTER,
            CFG,
            previous_details=[{"readFiles": ["notes.md"], "modifiedFiles": []}],
            instructions="the cache",
        )
        assert out is not None
        (sent,) = rec.calls
        assert all(m["role"] != "toolResult" for m in sent["messages"])
        assert len(sent["messages"]) == out.messages_summarized == 6
        assert sent["instructions"].startswith(BRANCH_SUMMARY_INSTRUCTIONS)
        assert "the cache" in sent["instructions"]
        assert out.summary.startswith(BRANCH_SUMMARY_PREAMBLE + "SUMMARY1")
        assert out.details == {
            "readFiles": ["notes.md"],
            "modifiedFiles": ["src/client.py", "tests/test_client.py"],
        }

    def test_budget_keeps_the_newest_messages(self) -> None:
        msgs = self.branch()
        tokens = [100] * len(msgs)
        rec = Recorder()
        out = run_branch_summary(msgs, rec, COUNTER, CFG, tokens=tokens, token_budget=250)
        assert out is not None and out.messages_summarized == 2
        assert rec.calls[0]["messages"] == [msgs[-3], msgs[-1]]  # msgs[-2] is a tool result

    def test_nothing_to_summarize(self) -> None:
        assert run_branch_summary([], Recorder(), COUNTER, CFG) is None
        with pytest.raises(NexusError, match="token counts"):
            run_branch_summary(self.branch(), Recorder(), COUNTER, CFG, tokens=[1])

    def test_extractive_branch_summary(self) -> None:
        out = run_branch_summary(self.branch(), ExtractiveSummarizer(), COUNTER, CFG)
        assert out is not None
        assert "Add caching to the API client" in out.summary
        assert "## Goal" in out.summary


def test_docs_examples_run() -> None:
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parent.parent / "docs" / "compaction.md"
    if not doc.exists():
        pytest.skip(f"{doc} is not part of this checkout")
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})
    import tomllib

    for block in re.findall(r"```toml\n(.*?)```", doc.read_text(), re.DOTALL):
        from nexus_store.compaction.policy import CompactionConfig

        CompactionConfig.model_validate(tomllib.loads(block)["compaction"])
