"""The nexus SDK sessions on PostgreSQL: the same Runner script gives the same reads as on SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nexus_store.openai_agents import NexusAdvancedSession, NexusSession

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest_plugins = ["tests.pg_server"]

from tests.test_openai_agents_advanced import play  # noqa: E402


@pytest.mark.slow
class TestOnPostgres:
    def test_runner_script_reads_the_same_as_on_sqlite(self, tmp_path: Path, pg_url: str) -> None:
        def run_on(target: str) -> dict[str, Any]:
            session = NexusAdvancedSession("s", target)
            try:
                return asyncio.run(play(session))
            finally:
                session.close()

        expected = run_on(str(tmp_path / "s.db"))
        got = run_on(pg_url)
        for key, value in expected.items():
            if "turns" in key and isinstance(value, list):
                value = [{k: v for k, v in t.items() if k != "timestamp"} for t in value]
            assert got[key] == value, key

    def test_plain_session_pop_and_limit(self, pg_url: str) -> None:
        async def go() -> tuple[Any, ...]:
            session = NexusSession("p", pg_url)
            items = [{"role": "user", "content": f"m{i}"} for i in range(5)]
            await session.add_items(items)
            last = await session.get_items(limit=2)
            popped = await session.pop_item()
            left = await session.get_items()
            session.close()
            return last, popped, left, items

        last, popped, left, items = asyncio.run(go())
        assert last == items[-2:]
        assert popped == items[-1]
        assert left == items[:-1]
