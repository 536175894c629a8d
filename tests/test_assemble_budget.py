"""`ContextEngine.assemble` stays within its budget and keeps calls with results
(issue 18, item 4); `fit_to_budget` checked against its rules on random contexts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.budget import fit_to_budget
from nexus_store.compaction.prune import PRUNED_PLACEHOLDER, PruneConfig
from nexus_store.engine import ContextEngine
from nexus_store.errors import InvalidArgument


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "timestamp": 0,
        "content": [{"type": "toolCall", "id": i, "name": "read", "arguments": {}} for i in ids],
    }


def result(call_id: str, size: int, tool: str = "read") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": tool,
        "content": [{"type": "text", "text": "r" * size}],
        "isError": False,
        "timestamp": 0,
    }


@pytest.fixture
def engine() -> ContextEngine:
    return ContextEngine(Store(memory=True, counter="chars4"), owns_store=True)


def _calls_and_results_paired(messages: list[dict[str, Any]]) -> bool:
    """Every result follows the assistant message that called it, and every call has results."""
    open_ids: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "toolResult":
            if message["toolCallId"] not in open_ids:
                return False
            open_ids.discard(message["toolCallId"])
            continue
        if open_ids:
            return False  # a call whose result was left out
        if role == "assistant":
            open_ids = {
                b["id"]
                for b in message.get("content", [])
                if isinstance(b, dict) and b.get("type") == "toolCall"
            }
    return not open_ids


class TestIssueReproduction:
    @pytest.mark.parametrize("budget", [0, 1000, 4000])
    def test_a_call_is_never_split_from_its_result(
        self, engine: ContextEngine, budget: int
    ) -> None:
        sid = engine.bootstrap()
        engine.ingest(sid, user("read it"))
        engine.ingest(sid, call("c1"))
        engine.ingest(sid, result("c1", 20_000))  # 5,000 tokens (chars/4)
        out = engine.assemble(sid, token_budget=budget)
        assert out.estimated_tokens <= budget
        assert _calls_and_results_paired(out.messages)
        roles = [m["role"] for m in out.messages]
        assert roles != ["toolResult"]
        if budget >= 1000:  # room for the exchange once the output is a placeholder
            assert roles == ["user", "assistant", "toolResult"]
            assert out.messages[2]["content"][0]["text"] == PRUNED_PLACEHOLDER
            assert out.pruned == 1 and out.dropped == 0
        else:
            assert out.messages == [] and out.dropped == 3
        # a view: the stored turn keeps its whole output
        assert engine.store.context(sid).tokens > 5000

    @pytest.mark.parametrize("bad", [-1, -1000, 1.5, "1000", True, [1]])
    def test_a_bad_budget_is_a_clear_error(self, engine: ContextEngine, bad: object) -> None:
        sid = engine.bootstrap()
        engine.ingest(sid, user("hi"))
        with pytest.raises(InvalidArgument, match="token_budget"):
            engine.assemble(sid, token_budget=bad)  # type: ignore[arg-type]

    def test_older_exchanges_go_first_and_whole(self, engine: ContextEngine) -> None:
        sid = engine.bootstrap()
        for n in range(5):
            engine.ingest(sid, user(f"u{n}"))
            engine.ingest(sid, call(f"c{n}"))
            engine.ingest(sid, result(f"c{n}", 400))
        full = engine.assemble(sid)
        fitted = engine.assemble(sid, token_budget=full.estimated_tokens - 1)
        # the oldest exchange (3 messages) left out whole; the rest untouched
        assert fitted.dropped == 3 and fitted.pruned == 0
        assert fitted.messages == full.messages[3:]

    def test_within_budget_nothing_changes(self, engine: ContextEngine) -> None:
        sid = engine.bootstrap()
        engine.ingest(sid, user("u"))
        engine.ingest(sid, call("c"))
        engine.ingest(sid, result("c", 400))
        full = engine.assemble(sid)
        same = engine.assemble(sid, token_budget=full.estimated_tokens)
        assert same.messages == full.messages and same.dropped == same.pruned == 0


# -- the rules on random contexts ------------------------------------------------------

_exchange = st.tuples(
    st.integers(0, 400),  # the user message's length
    st.lists(  # assistant messages, each with 0-3 calls and their result sizes
        st.lists(st.integers(0, 8000), max_size=3), max_size=4
    ),
)


def _context(
    summary: bool, exchanges: list[tuple[int, list[list[int]]]], orphan: bool
) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = []
    if summary:
        messages.append({"role": "compactionSummary", "summary": "s", "tokensBefore": 9})
    if orphan:  # a result whose call was compacted away
        messages.append(result("gone", 100))
    n = 0
    for length, turns in exchanges:
        messages.append(user("u" * length))
        for sizes in turns:
            ids = [f"c{n + k}" for k in range(len(sizes))]
            n += len(sizes)
            messages.append(call(*ids) if ids else {"role": "assistant", "content": "ok"})
            messages.extend(
                result(i, s, "skill" if s % 7 == 0 else "read")
                for i, s in zip(ids, sizes, strict=True)
            )
    tokens = [len(str(m)) // 4 + 1 for m in messages]
    return messages, tokens


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    summary=st.booleans(),
    exchanges=st.lists(_exchange, max_size=6),
    orphan=st.booleans(),
    budget=st.integers(0, 20_000),
)
def test_fit_to_budget_rules(
    summary: bool, exchanges: list[tuple[int, list[list[int]]]], orphan: bool, budget: int
) -> None:
    messages, tokens = _context(summary, exchanges, orphan)
    cfg = PruneConfig(protect_tokens=2000, minimum_tokens=100)
    fitted = fit_to_budget(messages, tokens, budget, cfg)
    assert sum(fitted.tokens) <= budget
    assert len(fitted.tokens) == len(fitted.messages)
    if sum(tokens) <= budget:
        assert fitted.messages == messages and fitted.dropped == fitted.pruned == 0
        return
    # kept messages are the input's, in order (a pruned result differs only in content)
    index = 0
    for kept in fitted.messages:
        while index < len(messages) and not _same_except_content(messages[index], kept):
            index += 1
        assert index < len(messages), "a kept message is not from the input, or out of order"
        index += 1
    assert fitted.dropped == len(messages) - len(fitted.messages)
    # calls and results stay together (the orphan counts as a unit of its own)
    body = [m for m in fitted.messages if m.get("toolCallId") != "gone"]
    assert _calls_and_results_paired(body)


def _same_except_content(original: dict[str, Any], kept: dict[str, Any]) -> bool:
    if original == kept:
        return True
    return (
        original.get("role") == "toolResult"
        and {k: v for k, v in original.items() if k != "content"}
        == {k: v for k, v in kept.items() if k != "content"}
        and kept["content"][0]["text"] == PRUNED_PLACEHOLDER
    )
