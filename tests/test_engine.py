"""The context-engine lifecycle (seed 004) over the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.compaction.policy import CompactionConfig
from nexus_store.engine import ContextEngine
from nexus_store.examples import EXAMPLE_TRANSCRIPT


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def tool_result(i: int, size: int) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": f"c{i}",
        "toolName": "read",
        "content": [{"type": "text", "text": "r" * size}],
        "isError": False,
        "timestamp": 0,
    }


def call(i: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "timestamp": 0,
        "content": [
            {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": f"f{i}"}}
        ],
    }


@pytest.fixture
def engine() -> ContextEngine:
    return ContextEngine(Store(memory=True, counter="chars4"), owns_store=True)


def test_bootstrap_ingest_assemble(engine: ContextEngine) -> None:
    sid = engine.bootstrap(cwd="/w")
    assert engine.bootstrap(sid) == sid  # idempotent
    assert engine.ingest(sid, user("hello")).ingested
    assert not engine.ingest(sid, user("ping"), is_heartbeat=True).ingested
    batch = engine.ingest_batch(sid, [call(1), tool_result(1, 40)])
    assert batch.ingested
    result = engine.assemble(sid)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "toolResult"]
    assert result.estimated_tokens == engine.store.context(sid).tokens
    assert engine.owns_compaction and engine.info.owns_compaction


def test_bootstrap_from_a_transcript(engine: ContextEngine) -> None:
    sid = engine.bootstrap(transcript=EXAMPLE_TRANSCRIPT)
    assert engine.assemble(sid).messages[0]["role"] == "compactionSummary"


def test_assemble_fits_the_budget_without_splitting_tool_pairs(engine: ContextEngine) -> None:
    sid = engine.bootstrap()
    for i in range(30):
        engine.ingest(sid, user(f"step {i}"))
        engine.ingest(sid, call(i))
        engine.ingest(sid, tool_result(i, 4000))
    full = engine.assemble(sid)
    small = engine.assemble(sid, token_budget=3000)
    assert small.estimated_tokens <= 3000 < full.estimated_tokens
    assert small.dropped > 0
    assert small.messages[0]["role"] != "toolResult"
    ids = {b["id"] for m in small.messages if m["role"] == "assistant" for b in m["content"]}
    assert all(m["toolCallId"] in ids for m in small.messages if m["role"] == "toolResult")
    assert engine.store.context(sid).tokens == full.estimated_tokens  # a view: nothing written


def test_after_turn_flushes_once_per_epoch_then_compacts() -> None:
    cfg = CompactionConfig(
        context_window=30_000,
        reserve_tokens_floor=2_000,
        soft_threshold_tokens=1_000,
        keep_recent_tokens=2_000,
    )
    engine = ContextEngine(Store(memory=True, counter="chars4"), config=cfg)
    sid = engine.bootstrap()
    flushes: list[str] = []
    for i in range(90):
        engine.ingest(sid, user(f"step {i}"))
        engine.ingest(sid, call(i))
        engine.ingest(sid, tool_result(i, 3000))
        result = engine.after_turn(sid, flush=flushes.append)
        if result.compaction is not None:
            assert result.compaction.compacted and result.tokens < 27_000
    compactions = engine.store.status(sid).compactions
    assert compactions >= 2
    assert len(flushes) == compactions  # one flush per compaction epoch
    assert engine.store.status(sid).tokens < cfg.context_window


def test_forced_compact_and_threshold() -> None:
    engine = ContextEngine(
        Store(memory=True, counter="chars4"), config=CompactionConfig(keep_recent_tokens=50)
    )
    sid = engine.bootstrap()
    for i in range(10):
        engine.ingest(sid, user(f"question {i} " * 30))
    assert not engine.compact(sid).compacted  # far below the threshold
    forced = engine.compact(sid, force=True, custom_instructions="keep questions")
    assert forced.compacted and forced.turn_id is not None
    assert engine.store.get_turn(sid, forced.turn_id).entry["trigger"] == "manual"


def test_subagent_fork_sees_the_parent_path_without_copies(engine: ContextEngine) -> None:
    parent = engine.bootstrap()
    engine.ingest(parent, user("parent context"))
    spawn = engine.prepare_subagent_spawn(parent, context_mode="fork")
    child = spawn.child_session_id
    engine.ingest(child, user("child task"))
    assert [m["content"] for m in engine.assemble(child).messages] == [
        "parent context",
        "child task",
    ]
    assert engine.store.get_session(child).turn_count == 1  # nothing copied
    engine.ingest(parent, user("later in parent"))
    assert [m["content"] for m in engine.assemble(child).messages] == [
        "parent context",
        "child task",
    ]
    ended = engine.on_subagent_ended(child, result="done")
    assert ended is not None and ended.entry["data"]["result"] == "done"


def test_isolated_spawn_and_rollback(engine: ContextEngine) -> None:
    parent = engine.bootstrap()
    engine.ingest(parent, user("secret parent context"))
    spawn = engine.prepare_subagent_spawn(parent, context_mode="isolated")
    assert engine.assemble(spawn.child_session_id).messages == []
    assert engine.rollback_spawn(spawn)
    assert engine.store.find_session(spawn.child_session_id) is None
    used = engine.prepare_subagent_spawn(parent)
    engine.ingest(used.child_session_id, user("work"))
    assert not engine.rollback_spawn(used)  # a session with turns is kept


def test_dispose_closes_an_owned_store(tmp_path: Path) -> None:
    engine = ContextEngine(Store(tmp_path / "e.db", counter="chars4"), owns_store=True)
    engine.bootstrap()
    engine.dispose()
    with pytest.raises(sqlite3.ProgrammingError):
        engine.store.list_sessions()
