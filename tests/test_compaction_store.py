"""Compaction through the store never loses history."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import NexusError, Store, SummarizerError
from nexus_store.compaction.policy import CompactionConfig


def exchange(store: Store, sid: str, i: int, size: int = 400) -> None:
    store.append_message(
        sid, {"role": "user", "content": f"task {i}: edit src/f{i}.py", "timestamp": i}
    )
    store.append_message(
        sid,
        {
            "role": "assistant",
            "timestamp": i,
            "content": [
                {"type": "text", "text": "reading " * 20},
                {
                    "type": "toolCall",
                    "id": f"c{i}",
                    "name": "read",
                    "arguments": {"path": f"src/f{i}.py"},
                },
            ],
        },
    )
    store.append_message(
        sid,
        {
            "role": "toolResult",
            "toolCallId": f"c{i}",
            "toolName": "read",
            "content": [{"type": "text", "text": "y" * size}],
            "isError": False,
            "timestamp": i,
        },
    )


def snapshot(store: Store, sid: str) -> dict[str, Any]:
    return {t.id: store.context(sid, t.id).to_json_dict() for t in store.iter_turns(sid)}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["talk", "talk", "compact", "branch", "summary_branch"]),
        min_size=1,
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_no_turn_is_lost_and_earlier_contexts_never_change(ops: list[str], rnd: Any) -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(3):
            exchange(store, sid, i)
        for n, op in enumerate(ops):
            before = snapshot(store, sid)
            if op == "talk":
                exchange(store, sid, 100 + n)
            elif op == "compact":
                try:
                    store.compact(sid, keep_recent_tokens=rnd.choice([0, 50, 200, 600]))
                except NexusError as err:
                    assert "nothing to compact" in str(err)
            else:
                target = rnd.choice(list(before))
                if op == "branch":
                    store.navigate(sid, target)
                else:
                    store.navigate_with_summary(sid, target)
            after = snapshot(store, sid)
            # every turn is still there, and every earlier leaf sees exactly what it saw
            assert set(before) <= set(after)
            for turn_id, ctx in before.items():
                assert after[turn_id] == ctx


def test_turns_kept_by_one_compaction_are_summarized_by_the_next() -> None:
    """pi issue #2608: the next window must start at the previous first kept turn."""
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(10):
            exchange(store, sid, i)
        first = store.compact(sid, keep_recent_tokens=400)
        kept_from = first.plan.first_kept_turn_id
        assert kept_from is not None
        kept_turn = store.get_turn(sid, kept_from)
        for i in range(10, 20):
            exchange(store, sid, i)
        second = store.compact(sid, keep_recent_tokens=400)
        summarized = [*second.plan.to_summarize, *second.plan.split_turn_prefix]
        first_kept_message = kept_turn.entry["message"]
        assert first_kept_message in summarized
        # and the previous summary was updated, not dropped
        assert second.plan.previous_summary == first.outcome.summary  # type: ignore[union-attr]
        assert "src/f0.py" in second.outcome.summary  # type: ignore[union-attr]


def test_compaction_turn_records_everything_and_moves_the_leaf() -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(6):
            exchange(store, sid, i)
        leaf = store.get_session(sid).active_leaf
        result = store.compact(sid, keep_recent_tokens=300, instructions="keep the file list")
        turn = result.turn
        assert turn is not None and turn.parent_id == leaf
        assert store.get_session(sid).active_leaf == turn.id
        e = turn.entry
        assert e["trigger"] == "manual" and e["layer"] == "summarize"
        assert e["customInstruction"] == "keep the file list"
        assert e["messagesCompacted"] == result.plan.messages_compacted > 0
        assert e["tokensBefore"] == result.plan.tokens_before
        assert "src/f0.py" in e["details"]["readFiles"]
        ctx = store.context(sid)
        assert ctx.messages[0]["role"] == "compactionSummary"
        assert ctx.tokens < result.plan.tokens_before
        row = store.conn.execute(
            "select tokens_before, trigger, layer, messages_compacted from turns where uid = ?",
            [turn.id],
        ).fetchone()
        assert row == (e["tokensBefore"], "manual", "summarize", e["messagesCompacted"])


def test_dry_run_and_failing_summarizer_write_nothing() -> None:
    class Broken:
        def summarize(self, *a: Any, **k: Any) -> str:
            raise SummarizerError("endpoint down", status_code=503)

        def merge(self, *a: Any, **k: Any) -> str:
            raise SummarizerError("endpoint down", status_code=503)

    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(6):
            exchange(store, sid, i)
        dump = list(store.conn.iterdump())
        plan = store.compact(sid, keep_recent_tokens=300, dry_run=True).plan
        assert plan.messages_compacted > 0
        with pytest.raises(SummarizerError):
            store.compact(sid, keep_recent_tokens=300, summarizer=Broken())
        assert list(store.conn.iterdump()) == dump


def test_prune_layer_needs_no_model_and_prune_view_writes_nothing() -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(12):
            exchange(store, sid, i, size=40_000)
        dump = list(store.conn.iterdump())
        view, outcome = store.pruned_context(sid)
        assert outcome.pruned and view.tokens < store.context(sid).tokens
        assert any(
            m.get("content") == [{"type": "text", "text": "[output pruned for context]"}]
            for m in view.messages
            if isinstance(m, dict)
        )
        assert list(store.conn.iterdump()) == dump
        result = store.compact(sid, layer="prune", summarizer=object())  # type: ignore[arg-type]
        assert result.turn is not None and result.turn.entry["layer"] == "prune"


def test_memory_flush_once_per_epoch() -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        for i in range(6):
            exchange(store, sid, i)
        assert store.should_flush(sid)
        store.record_flush(sid)
        assert not store.should_flush(sid)
        assert not store.should_flush(sid)  # the trigger firing again in the same epoch
        store.compact(sid, keep_recent_tokens=300)
        assert store.should_flush(sid)  # a new epoch
        store.record_flush(sid)
        assert not store.should_flush(sid)
        assert store.get_session(sid).flush_epoch == 1


def test_branch_summary_records_what_was_tried() -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        exchange(store, sid, 0)
        fork = store.get_session(sid).active_leaf
        for i in range(1, 4):
            exchange(store, sid, i)
        turn = store.navigate_with_summary(sid, fork)
        assert turn is not None and turn.kind == "branch_summary" and turn.parent_id == fork
        assert store.get_session(sid).active_leaf == turn.id
        ctx = store.context(sid)
        assert ctx.messages[-1]["role"] == "branchSummary"
        assert "src/f1.py" in ctx.messages[-1]["summary"]


def test_config_limits_are_validated() -> None:
    with pytest.raises(NexusError):
        from nexus_store.compaction.policy import load_config

        load_config(overrides={"context_window": 1000})
    assert CompactionConfig().context_window == 200_000
