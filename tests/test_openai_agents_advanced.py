"""NexusAdvancedSession against the SDK's AdvancedSQLiteSession on the same Runner script.

A scripted model (the SDK's ``agents.testing.ScriptedModel``; no network) answers several
turns, one with a tool call; a branch is made in the middle and continued; usage is
recorded after each run. Every read of both sessions must agree. Then what only the
tree gives: the branch copied nothing, pops and deletes keep the turns, and usage sits
in SQL columns.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from nexus_store import Store
from nexus_store.openai_agents import NexusAdvancedSession

agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, Runner, function_tool  # noqa: E402
from agents.extensions.memory import AdvancedSQLiteSession  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402


@function_tool
def weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def usage(requests: int, inp: int, out: int) -> Usage:
    return Usage(requests=requests, input_tokens=inp, output_tokens=out, total_tokens=inp + out)


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelStep(output=[assistant_message("Hello!")], usage=usage(1, 100, 20)),
            ModelStep(
                output=[function_call("weather", {"city": "Oslo"}, call_id="c1")],
                usage=usage(1, 150, 10),
            ),
            ModelStep(output=[assistant_message("Sunny in Oslo.")], usage=usage(1, 200, 30)),
            ModelStep(output=[assistant_message("Bye.")], usage=usage(1, 250, 5)),
            # on the branch made from turn 2
            ModelStep(output=[assistant_message("Rain in Bergen.")], usage=usage(1, 120, 15)),
            ModelStep(output=[assistant_message("Still raining.")], usage=usage(1, 140, 25)),
        ]
    )


async def play(session: Any) -> dict[str, Any]:
    """Run the script on a session and collect every read the advanced API offers."""
    agent = Agent(name="a", model=script(), tools=[weather])
    seen: dict[str, Any] = {}
    for prompt in ("hi", "weather in Oslo?", "bye"):
        result = await Runner.run(agent, prompt, session=session)
        await session.store_run_usage(result)
    seen["main_items"] = await session.get_items()
    seen["main_turns"] = [
        {k: t[k] for k in ("turn", "content", "full_content")}
        for t in await session.get_conversation_turns()
    ]
    branch = await session.create_branch_from_turn(2, "bergen")
    seen["branch_id"] = branch
    seen["branch_start"] = await session.get_items()
    for prompt in ("weather in Bergen?", "and now?"):
        result = await Runner.run(agent, prompt, session=session)
        await session.store_run_usage(result)
    seen["branch_items"] = await session.get_items()
    seen["main_again"] = await session.get_items(branch_id="main")
    seen["branches"] = sorted(
        (b["branch_id"], b["message_count"], b["user_turns"], b["is_current"])
        for b in await session.list_branches()
    )
    for branch_id in (None, "main", "bergen"):
        seen[f"session_usage_{branch_id}"] = await session.get_session_usage(branch_id)
        seen[f"turn_usage_{branch_id}"] = await session.get_turn_usage(branch_id=branch_id)
        seen[f"tools_{branch_id}"] = await session.get_tool_usage(branch_id)
        seen[f"by_turns_{branch_id}"] = await session.get_conversation_by_turns(branch_id)
    seen["turn_2_usage_main"] = await session.get_turn_usage(2, branch_id="main")
    seen["find"] = [t["turn"] for t in await session.find_turns_by_content("weather")]
    seen["popped"] = await session.pop_item()
    seen["after_pop"] = await session.get_items(limit=2)
    await session.switch_to_branch("main")
    await session.delete_branch("bergen")
    seen["branches_after_delete"] = [b["branch_id"] for b in await session.list_branches()]
    seen["usage_after_delete"] = await session.get_session_usage()
    return seen


class TestSameAsAdvancedSQLiteSession:
    def test_runner_script_gives_the_same_items_and_usage(self, tmp_path: Path) -> None:
        theirs = AdvancedSQLiteSession(
            session_id="s", db_path=tmp_path / "sdk.db", create_tables=True
        )
        ours = NexusAdvancedSession("s", tmp_path / "nexus.db")
        try:
            expected = asyncio.run(play(theirs))
            got = asyncio.run(play(ours))
        finally:
            theirs.close()
            ours.close()
        assert expected["session_usage_None"]["requests"] == 6  # the script really ran
        assert expected["tools_main"] == [("weather", 1, 2)]
        for key, value in expected.items():
            assert got[key] == value, key


class TestTreeBranches:
    def test_branch_copies_nothing_and_history_stays(self, tmp_path: Path) -> None:
        db = tmp_path / "nexus.db"
        session = NexusAdvancedSession("s", db)
        try:
            asyncio.run(play(session))
        finally:
            session.close()
        with Store(db) as store:
            messages = store.conn.execute("select count(*) from messages").fetchone()[0]
            branches = store.conn.execute(
                "select name, deleted_utc is not null from agent_branches order by id"
            ).fetchall()
            usage_rows = store.conn.execute(
                "select branch, requests, input_tokens, output_tokens, total_tokens "
                "from agent_usage order by id"
            ).fetchall()
        # 3 main turns (user, assistant; user, call, output, assistant; user, assistant),
        # 2 branch turns (user, assistant each): every item written once, none copied;
        # the popped item and the deleted branch's turns are still there.
        assert messages == 2 + 4 + 2 + 2 + 2
        assert branches == [("main", 0), ("bergen", 1)]
        # usage of the deleted branch is gone, main's stays (as AdvancedSQLiteSession)
        assert [r[0] for r in usage_rows] == ["main", "main", "main"]
        assert usage_rows[1][1:] == (2, 350, 40, 390)

    def test_branch_names_are_reserved_and_checked(self) -> None:
        async def go() -> None:
            session = NexusAdvancedSession("s")
            await session.add_items([{"role": "user", "content": "a"}])
            with pytest.raises(ValueError, match="does not contain a user message"):
                await session.create_branch_from_turn(2)
            with pytest.raises(ValueError, match="cannot be empty"):
                await session.create_branch_from_turn(1, " ")
            await session.switch_to_branch("main")
            assert await session.create_branch_from_turn(1, "x") == "x"
            await session.add_items([{"role": "user", "content": "b"}])
            await session.switch_to_branch("main")
            await session.delete_branch("x")
            with pytest.raises(ValueError, match="already been used"):
                await session.create_branch_from_turn(1, "x")
            with pytest.raises(ValueError, match="does not exist"):
                await session.switch_to_branch("x")
            with pytest.raises(ValueError, match="'main'"):
                await session.delete_branch("main")
            session.close()
            with pytest.raises(RuntimeError, match="closed"):
                await session.list_branches()

        asyncio.run(go())

    def test_compaction_from_the_session_keeps_history(self, tmp_path: Path) -> None:
        async def go() -> tuple[list[Any], int]:
            session = NexusAdvancedSession("s", tmp_path / "c.db")
            for i in range(12):
                await session.add_items(
                    [
                        {"role": "user", "content": f"question {i} " + "word " * 200},
                        {"role": "assistant", "content": f"answer {i} " + "word " * 200},
                    ]
                )
            result = await session.compact(summarizer="extractive", keep_recent_tokens=500)
            assert result.turn is not None
            items = await session.get_items()
            await session.add_items([{"role": "user", "content": "after"}])
            items_after = await session.get_items(limit=1)
            session.close()
            with Store(tmp_path / "c.db") as store:
                kept = store.conn.execute("select count(*) from messages").fetchone()[0]
            return [items, items_after], kept

        (items, after), kept = asyncio.run(go())
        assert items[0]["role"] == "user"
        assert "summary" in items[0]["content"].lower()
        assert len(items) < 24
        assert items[-1]["content"].startswith("answer 11")
        assert after == [{"role": "user", "content": "after"}]
        assert kept == 25  # nothing was deleted


class TestGcKeepsNamedBranches:
    def test_gc_keeps_the_turns_of_a_live_named_branch(self, tmp_path: Path) -> None:
        db = tmp_path / "gc.db"

        async def build(session: NexusAdvancedSession) -> list[Any]:
            await session.add_items([{"role": "user", "content": "one"}])
            await session.add_items([{"role": "assistant", "content": "first answer"}])
            await session.add_items([{"role": "user", "content": "two"}])
            await session.create_branch_from_turn(2, "side")
            await session.add_items([{"role": "user", "content": "two, differently"}])
            await session.add_items([{"role": "assistant", "content": "side answer"}])
            side = await session.get_items()
            await session.switch_to_branch("main")
            return side

        session = NexusAdvancedSession("s", db)
        try:
            side = asyncio.run(build(session))
        finally:
            session.close()
        with Store(db) as store:
            store.gc("s", dead_branches_older_than=0, vacuum=False)
        session = NexusAdvancedSession("s", db)
        try:
            # the branch the session is not on is off the active path, but its name keeps it
            assert asyncio.run(session.get_items(branch_id="side")) == side
        finally:
            session.close()


def _stale_usage(cls: Any, db: Path) -> tuple[Any, str]:
    """One instance branches; another clears and records usage; the first reads usage."""

    async def go() -> tuple[Any, str]:
        stale = cls(session_id="s", db_path=db, create_tables=True)
        clearer = cls(session_id="s", db_path=db)
        try:
            await stale.add_items(
                [
                    {"role": "user", "content": "old question"},
                    {"role": "assistant", "content": "old answer"},
                    {"role": "user", "content": "old follow-up"},
                ]
            )
            await stale.create_branch_from_turn(2, "stale")
            await clearer.clear_session()
            await clearer.add_items([{"role": "user", "content": "new question"}])
            run = await Runner.run(
                Agent(name="a", model=ScriptedModel([ModelStep(usage=usage(1, 50, 30))])),
                "ignored",
            )
            await clearer.store_run_usage(run)
            return await stale.get_turn_usage(1), stale._current_branch_id
        finally:
            stale.close()
            clearer.close()

    return asyncio.run(go())


class TestStaleInstances:
    def test_stale_instance_reads_main_usage_after_another_clears(self, tmp_path: Path) -> None:
        theirs = _stale_usage(AdvancedSQLiteSession, tmp_path / "sdk.db")
        ours = _stale_usage(
            lambda **kw: NexusAdvancedSession(kw["session_id"], kw["db_path"]),
            tmp_path / "nexus.db",
        )
        # the stale instance's branch is gone: it reads main's usage, the clearer's run
        assert theirs[0]["input_tokens"] == 50
        assert theirs[1] == "main"
        assert ours == theirs


class TestBranchLog:
    @pytest.mark.parametrize("redacted", [True, False])
    def test_branch_creation_is_logged_as_the_sdk_logs_it(
        self, monkeypatch: pytest.MonkeyPatch, redacted: bool
    ) -> None:
        import agents._debug as sdk_debug

        monkeypatch.setattr(sdk_debug, "DONT_LOG_MODEL_DATA", redacted)
        logger = logging.getLogger("test_branch_log")

        async def go(session: Any) -> None:
            await session.add_items(
                [
                    {"role": "user", "content": "secret " * 10},
                    {"role": "assistant", "content": "answer"},
                ]
            )
            await session.create_branch_from_turn(1, "b")
            session.close()

        lines = []
        for session in (
            AdvancedSQLiteSession(session_id="s", create_tables=True, logger=logger),
            NexusAdvancedSession("s", logger=logger),
        ):
            with patch.object(logger, "debug") as debug:
                asyncio.run(go(session))
            lines.append(debug.call_args)
        assert lines[0] == lines[1]
        assert ("secret" in str(lines[1])) is not redacted


# -- across processes: branch reservations and pops serialize on the write lock --------


def _branch_in_process(
    db: str, name: str | None, worker: str, hold: bool, checked: Any, release: Any, out: Any
) -> None:
    """Create a branch from turn 2; the first name check signals and may hold its transaction."""
    from nexus_store.store.agent_sessions import AgentSessions

    session = NexusAdvancedSession("s", db)
    real = AgentSessions.add_branch

    def add_branch(self: AgentSessions, *args: Any) -> bool:
        added = real(self, *args)
        if not checked.is_set():
            checked.set()
            if hold and not release.wait(30):
                raise TimeoutError("not released")
        return added

    try:
        with (
            patch.object(AgentSessions, "add_branch", add_branch),
            patch("time.time", return_value=1_700_000_000.0),
        ):
            branch = asyncio.run(session.create_branch_from_turn(2, name))
        asyncio.run(session.add_items([{"role": "user", "content": f"{worker} item"}]))
        out.put((worker, "ok", branch))
    except ValueError as err:
        out.put((worker, "error", str(err)))
    finally:
        session.close()


def _pop_in_process(db: str, start: Any, out: Any) -> None:
    session = NexusAdvancedSession("s", db)
    try:
        start.wait(30)
        out.put(asyncio.run(session.pop_item()))
    finally:
        session.close()


ITEMS = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "first"},
    {"role": "user", "content": "two"},
    {"role": "assistant", "content": "second"},
]


@pytest.mark.slow
class TestAcrossProcesses:
    @pytest.mark.parametrize("name", [None, "shared"])
    def test_branch_reservations_serialize(self, tmp_path: Path, name: str | None) -> None:
        db = tmp_path / "b.db"
        setup = NexusAdvancedSession("s", db)
        asyncio.run(setup.add_items(ITEMS))
        setup.close()
        ctx = multiprocessing.get_context("spawn")
        out, release = ctx.Queue(), ctx.Event()
        checked = [ctx.Event(), ctx.Event()]
        workers = [
            ctx.Process(
                target=_branch_in_process,
                args=(str(db), name, worker, hold, event, release, out),
            )
            for worker, hold, event in (("first", True, checked[0]), ("second", False, checked[1]))
        ]
        try:
            workers[0].start()
            assert checked[0].wait(60)  # the first holds its reservation, uncommitted
            workers[1].start()
            # the second cannot check its name while the first's transaction is open
            assert not checked[1].wait(3)
            release.set()
            results = sorted(out.get(timeout=60) for _ in workers)
            for worker in workers:
                worker.join(30)
                assert worker.exitcode == 0
        finally:
            release.set()
            for worker in workers:
                if worker.is_alive():
                    worker.terminate()
        if name is None:
            assert [r[1:] for r in results] == [
                ("ok", "branch_from_turn_2_1700000000"),
                ("ok", "branch_from_turn_2_1700000000_2"),
            ]
        else:
            assert [r[1] for r in results] == ["ok", "error"]
            assert "already been used" in results[1][2]
        check = NexusAdvancedSession("s", db)
        try:
            for worker, outcome, branch in results:
                if outcome == "ok":
                    assert asyncio.run(check.get_items(branch_id=branch)) == [
                        *ITEMS[:2],
                        {"role": "user", "content": f"{worker} item"},
                    ]
            assert asyncio.run(check.get_items(branch_id="main")) == ITEMS
        finally:
            check.close()

    def test_two_processes_never_pop_the_same_item(self, tmp_path: Path) -> None:
        db = tmp_path / "p.db"
        setup = NexusAdvancedSession("s", db)
        asyncio.run(setup.add_items(ITEMS[:1]))
        setup.close()
        ctx = multiprocessing.get_context("spawn")
        out, start = ctx.Queue(), ctx.Event()
        workers = [ctx.Process(target=_pop_in_process, args=(str(db), start, out)) for _ in "ab"]
        for worker in workers:
            worker.start()
        start.set()
        popped = [out.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(30)
        assert sorted(popped, key=str) == [None, ITEMS[0]]


class TestFindTurnsByContent:
    TURNS = (
        "What is the WEATHER in Oslo?",
        "100% sure_thing",
        "Été à Paris",
        "été à Lyon",
        "plain words",
    )
    TERMS = ("eath", "weather", "100%", "0%", "_thing", "1_0", "%", "Été", "été", "x", "à")

    def test_matches_advanced_sqlite_session_term_for_term(self, tmp_path: Path) -> None:
        async def go(session: Any) -> dict[str, list[int]]:
            for text in self.TURNS:
                await session.add_items([{"role": "user", "content": text}])
                await session.add_items([{"role": "assistant", "content": "weather " + text}])
            await session.add_items(
                [{"role": "user", "content": [{"type": "input_text", "text": "parted eath"}]}]
            )
            found = {
                t: [m["turn"] for m in await session.find_turns_by_content(t)] for t in self.TERMS
            }
            session.close()
            return found

        theirs = asyncio.run(
            go(AdvancedSQLiteSession(session_id="s", db_path=tmp_path / "a.db", create_tables=True))
        )
        ours = asyncio.run(go(NexusAdvancedSession("s", tmp_path / "n.db")))
        assert theirs["eath"] == [1, 6]  # inside a word, any case, in a content part
        assert theirs["%"] == [2] and theirs["1_0"] == []  # LIKE's wildcards are literal
        assert theirs["Été"] == [3]  # non-ASCII case is not folded
        assert ours == theirs
