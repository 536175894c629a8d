from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store.compaction.prune import (
    BUILTIN_PROTECTED_TOOLS,
    PRUNED_PLACEHOLDER,
    PruneConfig,
    prune_context,
    tool_output_tokens,
)
from nexus_store.errors import NexusError
from nexus_store.tokens import CharsEstimator, message_tokens

PLACEHOLDER_TOKENS = message_tokens(
    CharsEstimator(),
    {"role": "toolResult", "content": [{"type": "text", "text": PRUNED_PLACEHOLDER}]},
)


def user(text: str = "do it") -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(cid: str, name: str = "bash") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": cid, "name": name, "arguments": {}}],
    }


def result(cid: str, name: str = "bash", text: str = "output") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": cid,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 5,
    }


def session(
    turns: list[list[tuple[str, int]]],
) -> tuple[list[dict[str, Any]], list[int]]:
    """turns: per user turn, a list of (tool name, result tokens)."""
    msgs: list[dict[str, Any]] = []
    tokens: list[int] = []
    for t, results in enumerate(turns):
        msgs.append(user(f"turn {t}"))
        tokens.append(5)
        for k, (name, size) in enumerate(results):
            cid = f"t{t}k{k}"
            msgs.append(call(cid, name))
            tokens.append(10)
            msgs.append(result(cid, name))
            tokens.append(size)
    return msgs, tokens


def pruned_texts(res_messages: list[dict[str, Any]]) -> list[int]:
    return [
        i
        for i, m in enumerate(res_messages)
        if m.get("role") == "toolResult" and m["content"][0]["text"] == PRUNED_PLACEHOLDER
    ]


class TestPruneRules:
    def test_old_outputs_beyond_protect_window_are_pruned(self) -> None:
        # 4 turns of 30K output each; last 2 turns protected; of the older 60K, the newest
        # 40K are protected, so the 30K that crosses the line and the one before go.
        msgs, tokens = session(
            [[("bash", 30_000)], [("bash", 30_000)], [("bash", 30_000)], [("bash", 30_000)]]
        )
        res = prune_context(msgs, tokens)
        # indices: turn0 result=2, turn1 result=5 (turns 2,3 protected)
        # protect 40K: turn1's 30K is within, turn0's crosses (60K > 40K) -> pruned
        assert res.pruned == [2]
        assert res.messages[2]["content"] == [{"type": "text", "text": PRUNED_PLACEHOLDER}]
        assert res.tokens[2] == PLACEHOLDER_TOKENS
        assert res.tokens_saved == 30_000 - PLACEHOLDER_TOKENS
        assert res.tokens_after == sum(tokens) - res.tokens_saved

    def test_pruned_message_keeps_its_other_keys(self) -> None:
        msgs, tokens = session([[("bash", 50_000)], [("bash", 30_000)], [], []])
        res = prune_context(msgs, tokens)
        assert res.pruned == [2]
        pruned = res.messages[2]
        assert {k: v for k, v in pruned.items() if k != "content"} == {
            k: v for k, v in msgs[2].items() if k != "content"
        }

    def test_last_two_user_turns_are_protected(self) -> None:
        # huge outputs, but all inside the last 2 user turns
        msgs, tokens = session([[("bash", 100_000)], [("bash", 100_000), ("bash", 100_000)]])
        res = prune_context(msgs, tokens)
        assert res.pruned == []
        # with three turns, the oldest becomes prunable
        msgs, tokens = session([[("bash", 100_000)], [("bash", 100_000)], [("bash", 100_000)]])
        assert prune_context(msgs, tokens).pruned == [2]

    def test_protect_user_turns_is_configurable(self) -> None:
        msgs, tokens = session([[("bash", 100_000)], [("bash", 100_000)]])
        res = prune_context(msgs, tokens, PruneConfig(protect_user_turns=1, protect_tokens=0))
        assert res.pruned == [2]

    def test_stops_at_latest_compaction_summary(self) -> None:
        old, old_tokens = session([[("bash", 100_000)], [("bash", 100_000)]])
        new, new_tokens = session([[("bash", 100_000)], [], []])
        summary = {"role": "compactionSummary", "summary": "s", "tokensBefore": 1}
        msgs = [*old, summary, *new]
        tokens = [*old_tokens, 10, *new_tokens]
        res = prune_context(msgs, tokens, PruneConfig(protect_tokens=0))
        boundary = len(old)
        assert res.pruned == [boundary + 3]  # only after the boundary
        assert all(i > boundary for i in res.pruned)

    def test_summary_boundary_inside_protected_turns_still_stops(self) -> None:
        old, old_tokens = session([[("bash", 100_000)], [("bash", 100_000)], [("bash", 100_000)]])
        summary = {"role": "compactionSummary", "summary": "s", "tokensBefore": 1}
        msgs = [*old, summary, user("latest")]
        tokens = [*old_tokens, 10, 5]
        assert prune_context(msgs, tokens, PruneConfig(protect_tokens=0)).pruned == []

    def test_recent_tool_output_within_protect_tokens_is_kept(self) -> None:
        msgs, tokens = session([[("bash", 20_000), ("bash", 19_000)], [], []])
        res = prune_context(msgs, tokens, PruneConfig(minimum_tokens=0))
        assert res.pruned == []  # 39K <= 40K
        msgs, tokens = session([[("bash", 20_000), ("bash", 21_000)], [], []])
        res = prune_context(msgs, tokens, PruneConfig(minimum_tokens=0))
        assert res.pruned == [2]  # the older one crosses 40K

    def test_protect_boundary_is_exact(self) -> None:
        # newest-first running totals: 40_000 exactly is protected; one more token is not
        msgs, tokens = session([[("bash", 25_000), ("bash", 15_000)], [], []])
        assert prune_context(msgs, tokens, PruneConfig(minimum_tokens=0)).pruned == []
        msgs, tokens = session([[("bash", 25_001), ("bash", 15_000)], [], []])
        assert prune_context(msgs, tokens, PruneConfig(minimum_tokens=0)).pruned == [2]

    @pytest.mark.parametrize("tool", sorted(BUILTIN_PROTECTED_TOOLS))
    def test_builtin_protected_tools_never_pruned(self, tool: str) -> None:
        msgs, tokens = session([[(tool, 200_000), ("bash", 10)], [], []])
        res = prune_context(msgs, tokens, PruneConfig(protect_tokens=0, minimum_tokens=0))
        assert 2 not in res.pruned
        assert res.messages[2] is msgs[2]

    def test_configured_protected_tools_are_additive(self) -> None:
        msgs, tokens = session(
            [[("skill", 100_000), ("my_tool", 100_000), ("bash", 100_000)], [], []]
        )
        cfg = PruneConfig(protect_tokens=0, protected_tools=("my_tool",))
        assert cfg.all_protected_tools == BUILTIN_PROTECTED_TOOLS | {"my_tool"}
        res = prune_context(msgs, tokens, cfg)
        assert res.pruned == [6]  # only bash; skill (built-in) and my_tool kept

    def test_nothing_happens_below_minimum(self) -> None:
        # 19_999 + placeholder tokens would go: below 20K saved
        size = 19_999 + PLACEHOLDER_TOKENS
        msgs, tokens = session([[("bash", size)], [("bash", 40_000)], [], []])
        res = prune_context(msgs, tokens)
        assert res.pruned == [] and res.tokens_saved == 0
        assert res.messages == msgs and res.tokens_after == sum(tokens)
        # exactly 20_000 saved: prunes
        msgs, tokens = session(
            [[("bash", 20_000 + PLACEHOLDER_TOKENS)], [("bash", 40_000)], [], []]
        )
        res = prune_context(msgs, tokens)
        assert res.pruned == [2] and res.tokens_saved == 20_000

    def test_disabled(self) -> None:
        msgs, tokens = session([[("bash", 500_000)], [], [], []])
        assert prune_context(msgs, tokens, PruneConfig(enabled=False)).pruned == []

    def test_already_pruned_outputs_are_skipped(self) -> None:
        msgs, tokens = session([[("bash", 100_000)], [], []])
        first = prune_context(msgs, tokens, PruneConfig(protect_tokens=0))
        again = prune_context(
            first.messages, first.tokens, PruneConfig(protect_tokens=0, minimum_tokens=0)
        )
        assert again.pruned == [] and again.tokens_saved == 0

    def test_token_count_mismatch(self) -> None:
        with pytest.raises(NexusError, match="one count per message"):
            prune_context([user()], [])

    def test_tool_output_tokens(self) -> None:
        msgs, tokens = session([[("bash", 7), ("read", 11)], [("x", 13)]])
        assert tool_output_tokens(msgs, tokens) == 31


# -- properties ---------------------------------------------------------------------------

ROLES = st.sampled_from(
    ["user", "assistant", "toolResult", "toolResult", "compactionSummary", "custom"]
)
TOOLS = st.sampled_from(
    ["bash", "read", "skill", "memory_search", "gandiva_recall", "mine", "grep"]
)


@st.composite
def contexts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int], PruneConfig]:
    n = draw(st.integers(0, 40))
    msgs: list[dict[str, Any]] = []
    tokens: list[int] = []
    for i in range(n):
        role = draw(ROLES)
        if role == "toolResult":
            msgs.append(result(f"c{i}", draw(TOOLS), text=f"out {i}"))
        elif role == "compactionSummary":
            msgs.append({"role": role, "summary": "s", "tokensBefore": 3})
        else:
            msgs.append({"role": role, "content": f"m{i}"})
        tokens.append(draw(st.integers(0, 30_000)))
    cfg = PruneConfig(
        protect_tokens=draw(st.integers(0, 60_000)),
        minimum_tokens=draw(st.integers(0, 40_000)),
        protected_tools=tuple(draw(st.lists(TOOLS, max_size=2))),
        protect_user_turns=draw(st.integers(0, 3)),
    )
    return msgs, tokens, cfg


def protected_user_turn_start(msgs: list[dict[str, Any]], turns: int) -> int:
    """Index from which messages lie in the last ``turns`` user turns."""
    seen = 0
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i]["role"] == "user":
            seen += 1
            if seen == turns:
                return i
    return 0 if turns else len(msgs)


class TestPruneProperties:
    @settings(max_examples=300, deadline=None)
    @given(contexts())
    def test_invariants(self, ctx: tuple[list[dict[str, Any]], list[int], PruneConfig]) -> None:
        msgs, tokens, cfg = ctx
        before_msgs = copy.deepcopy(msgs)
        before_tokens = list(tokens)
        res = prune_context(msgs, tokens, cfg)
        # never mutates its inputs
        assert msgs == before_msgs and tokens == before_tokens
        # saved tokens are exactly the difference
        assert res.tokens_before == sum(tokens)
        assert res.tokens_after == sum(res.tokens)
        assert res.tokens_saved == res.tokens_before - res.tokens_after
        assert res.tokens_saved == 0 or res.tokens_saved >= cfg.minimum_tokens
        assert len(res.messages) == len(msgs)
        # exactly the reported indices changed, and only tool results of unprotected tools
        changed = [i for i, (a, b) in enumerate(zip(res.messages, msgs, strict=True)) if a != b]
        assert changed == res.pruned
        protected_from = protected_user_turn_start(msgs, cfg.protect_user_turns)
        boundary = max(
            (i for i, m in enumerate(msgs) if m["role"] == "compactionSummary"), default=-1
        )
        for i in res.pruned:
            assert msgs[i]["role"] == "toolResult"
            assert msgs[i]["toolName"] not in cfg.all_protected_tools
            assert i < protected_from, "pruned inside the protected user turns"
            assert i > boundary, "pruned before the latest compaction summary"
            assert res.messages[i]["content"][0]["text"] == PRUNED_PLACEHOLDER
        # the protect window: every pruned output reaches past protect_tokens of newer output
        if res.pruned:
            newest = max(res.pruned)
            kept_after = sum(
                tokens[j]
                for j in range(newest + 1, protected_from)
                if msgs[j]["role"] == "toolResult"
                and msgs[j]["toolName"] not in cfg.all_protected_tools
            )
            assert cfg.protect_tokens < kept_after + tokens[newest]
