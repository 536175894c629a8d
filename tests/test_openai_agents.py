"""The OpenAI Agents SDK adapter, tested against the real ``openai-agents`` package.

Run with an environment that has the SDK (``pip install nexus_store[openai-agents]``);
without it these tests skip. The item <-> message conversion tests need no SDK.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.openai_agents import MARK, NexusSession, item_to_message, message_to_items

try:
    from agents import (
        Agent,
        ModelResponse,
        RunConfig,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from agents.memory import Session, SessionSettings, SQLiteSession
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError:
    HAVE_SDK = False
else:
    HAVE_SDK = True
    set_tracing_disabled(True)  # no trace export: these tests never touch the network

requires_sdk = pytest.mark.skipif(
    not HAVE_SDK,
    reason="the openai-agents package is not installed (pip install 'nexus_store[openai-agents]')",
)

USER = {"role": "user", "content": "What is the weather in Paris?"}
USER_TYPED = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
SYSTEM = {"role": "developer", "content": "Be terse."}
ASSISTANT_EASY = {"role": "assistant", "content": "Sunny."}
ASSISTANT = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "It is sunny.", "annotations": [], "logprobs": []}],
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
    "status": "completed",
}
CALL_SPACED = {**CALL, "call_id": "call_2", "arguments": '{"city": "Paris"}'}
CALL_RAW = {**CALL, "call_id": "call_3", "arguments": '{ "city" : "Paris" }'}
CALL_BAD_JSON = {**CALL, "call_id": "call_4", "arguments": "not json"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21C"}
OUTPUT_LIST = {
    "type": "function_call_output",
    "call_id": "call_1",
    "output": [{"type": "input_text", "text": "sunny"}, {"type": "input_image", "image_url": "x"}],
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Check the tool."}],
    "encrypted_content": "abc",
}
WEB = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "x"}}
REFERENCE = {"type": "item_reference", "id": "msg_0"}
WEIRD = {"role": "user", "content": [{"type": "text", "text": "pi-style block"}]}
ALL_ITEMS = [
    USER,
    USER_TYPED,
    SYSTEM,
    ASSISTANT_EASY,
    ASSISTANT,
    CALL,
    CALL_SPACED,
    CALL_RAW,
    CALL_BAD_JSON,
    OUTPUT,
    OUTPUT_LIST,
    REASONING,
    WEB,
    REFERENCE,
    WEIRD,
    {MARK: "an item that uses our key", "type": "custom"},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class TestConversion:
    @pytest.mark.parametrize("item", ALL_ITEMS, ids=lambda i: str(i.get("type") or i.get("role")))
    def test_every_item_comes_back_exactly(self, item: dict[str, Any], store: Store) -> None:
        message = item_to_message(item, {"call_1": "get_weather"})
        s = store.create_session().id
        store.append_message(s, message)
        (stored,) = store.context(s).messages
        assert message_to_items(stored) == [item]

    def test_items_become_pi_messages(self) -> None:
        assert item_to_message(USER) == {
            "role": "user",
            "content": USER["content"],
            MARK: {"kind": "input"},
        }
        assistant = item_to_message(ASSISTANT)
        assert assistant["role"] == "assistant"
        assert assistant["content"][0]["type"] == "text"
        call = item_to_message(CALL)
        assert call["content"] == [
            {
                "type": "toolCall",
                "id": "call_1",
                "name": "get_weather",
                "arguments": {"city": "Paris"},
            }
        ]
        result = item_to_message(OUTPUT, {"call_1": "get_weather"})
        assert (result["role"], result["toolCallId"], result["toolName"]) == (
            "toolResult",
            "call_1",
            "get_weather",
        )
        assert result["content"] == [{"type": "text", "text": "sunny, 21C"}]
        assert item_to_message(REASONING)["content"][0]["type"] == "thinking"
        assert item_to_message(WEB) == {"role": "openaiItem", MARK: {"item": WEB}}

    def test_columns_tokens_and_search_work_on_items(self, store: Store) -> None:
        s = store.create_session().id
        for item in (USER, CALL, OUTPUT, ASSISTANT):
            store.append_message(s, item_to_message(item, {"call_1": "get_weather"}))
        row = store.conn.execute(
            "select tool_name, tool_call_id, text from messages where role = 'toolResult'"
        ).fetchone()
        assert row == ("get_weather", "call_1", "sunny, 21C")
        assert all(t.tokens > 0 for t in store.path(s))
        assert {h.role for h in store.search("sunny")} == {"assistant", "toolResult"}
        rendered = store.context(s).render("openai")
        assert [m["role"] for m in rendered] == ["user", "assistant", "tool", "assistant"]

    def test_not_a_dict(self) -> None:
        with pytest.raises(TypeError):
            item_to_message("hello")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            item_to_message({"role": "user", "content": object()})

    def test_pi_messages_become_items(self) -> None:
        pi_assistant = {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Let me look."},
                {"type": "toolCall", "id": "c9", "name": "read", "arguments": {"path": "a"}},
            ],
            "provider": "anthropic",
            "model": "claude",
            "timestamp": 1,
        }
        assert message_to_items(pi_assistant) == [
            {"role": "assistant", "content": "Let me look."},
            {
                "type": "function_call",
                "call_id": "c9",
                "name": "read",
                "arguments": '{"path": "a"}',
            },
        ]
        tool = {
            "role": "toolResult",
            "toolCallId": "c9",
            "toolName": "read",
            "content": [{"type": "text", "text": "data"}],
            "isError": False,
            "timestamp": 2,
        }
        assert message_to_items(tool) == [
            {"type": "function_call_output", "call_id": "c9", "output": "data"}
        ]
        summary = message_to_items({"role": "compactionSummary", "summary": "S", "tokensBefore": 9})
        assert summary[0]["role"] == "user" and "<summary>\nS\n</summary>" in summary[0]["content"]


@pytest.fixture
def session(tmp_path: Path) -> Iterator[NexusSession]:
    with NexusSession("conv-1", tmp_path / "agents.db") as s:
        yield s


@requires_sdk
class TestProtocol:
    def test_is_a_session(self, session: NexusSession) -> None:
        assert isinstance(session, Session)
        assert session.session_id == "conv-1"
        assert session.session_settings.limit is None  # SessionSettings(), as SQLiteSession

    def test_settings_dict_is_coerced(self, tmp_path: Path) -> None:
        with NexusSession("s", tmp_path / "a.db", session_settings={"limit": 2}) as s:
            assert isinstance(s.session_settings, SessionSettings)
            run(s.add_items([USER, ASSISTANT_EASY, USER_TYPED]))
            assert run(s.get_items()) == [ASSISTANT_EASY, USER_TYPED]


@requires_sdk
class TestRoundTrips:
    def test_add_get(self, session: NexusSession) -> None:
        run(session.add_items(ALL_ITEMS))
        assert run(session.get_items()) == ALL_ITEMS

    def test_limit_is_the_latest_items_in_order(self, session: NexusSession) -> None:
        run(session.add_items([USER, CALL, OUTPUT, ASSISTANT]))
        assert run(session.get_items(limit=2)) == [OUTPUT, ASSISTANT]
        assert run(session.get_items(limit=10)) == [USER, CALL, OUTPUT, ASSISTANT]
        assert run(session.get_items(limit=0)) == []

    def test_each_item_is_one_turn_in_one_transaction(self, session: NexusSession) -> None:
        run(session.add_items([USER, CALL, OUTPUT]))
        turns = session.store.path("conv-1")
        assert [t.kind for t in turns] == ["message"] * 3
        assert [t.depth for t in turns] == [0, 1, 2]

    def test_survives_reopening(self, tmp_path: Path) -> None:
        with NexusSession("again", tmp_path / "r.db") as first:
            run(first.add_items([USER, CALL]))
        with NexusSession("again", tmp_path / "r.db") as second:
            assert run(second.get_items()) == [USER, CALL]
            run(second.add_items([OUTPUT]))
            row = second.store.conn.execute(
                "select tool_name from messages where role = 'toolResult'"
            ).fetchone()
            assert row == ("get_weather",)  # the call's name was learned from history

    def test_sessions_are_separate(self, tmp_path: Path) -> None:
        store = Store(tmp_path / "shared.db")
        a, b = NexusSession("a", store=store), NexusSession("b", store=store)
        run(a.add_items([USER]))
        run(b.add_items([ASSISTANT]))
        assert run(a.get_items()) == [USER]
        assert run(b.get_items()) == [ASSISTANT]
        store.close()


@requires_sdk
class TestPopAndClear:
    def test_pop_moves_the_leaf_back_and_keeps_history(self, session: NexusSession) -> None:
        run(session.add_items([USER, CALL, OUTPUT]))
        assert run(session.pop_item()) == OUTPUT
        assert run(session.get_items()) == [USER, CALL]
        assert session.store.get_session("conv-1").turn_count == 3
        run(session.add_items([ASSISTANT]))
        assert run(session.get_items()) == [USER, CALL, ASSISTANT]
        assert len(session.store.leaves("conv-1")) == 2  # the popped item is a branch

    def test_pop_until_empty(self, session: NexusSession) -> None:
        run(session.add_items([USER, ASSISTANT]))
        assert run(session.pop_item()) == ASSISTANT
        assert run(session.pop_item()) == USER
        assert run(session.pop_item()) is None
        assert run(session.get_items()) == []

    def test_pop_from_a_turn_with_several_messages(self, session: NexusSession) -> None:
        session.store.append_messages("conv-1", [item_to_message(USER), item_to_message(ASSISTANT)])
        assert run(session.pop_item()) == ASSISTANT
        assert run(session.get_items()) == [USER]

    def test_advanced_pop_from_a_turn_with_several_messages(self) -> None:
        from nexus_store.openai_agents import NexusAdvancedSession

        with Store(memory=True) as store:
            store.create_session(id="s")
            store.append_messages("s", [item_to_message(USER), item_to_message(ASSISTANT)])
            session = NexusAdvancedSession("s", store=store)  # main starts at that turn
            assert run(session.pop_item()) == ASSISTANT
            assert run(session.get_items()) == [USER]
            run(session.add_items([ASSISTANT_EASY]))
            assert run(session.get_items()) == [USER, ASSISTANT_EASY]

    def test_clear_starts_a_new_branch(self, session: NexusSession) -> None:
        run(session.add_items([USER, ASSISTANT]))
        run(session.clear_session())
        assert run(session.get_items()) == []
        run(session.add_items([USER_TYPED]))
        assert run(session.get_items()) == [USER_TYPED]
        roots = session.store.children("conv-1", None)
        assert len(roots) == 2

    def test_compaction_replaces_history_with_its_summary(self, session: NexusSession) -> None:
        run(session.add_items([USER, ASSISTANT_EASY, USER_TYPED]))
        kept = session.store.path("conv-1")[-1].id
        session.store.append_compaction("conv-1", "Asked about Paris weather.", kept, 50)
        items = run(session.get_items())
        assert items[0]["role"] == "user" and "Asked about Paris weather." in items[0]["content"]
        assert items[1:] == [USER_TYPED]

    def test_store_compact_on_sdk_items(self, session: NexusSession) -> None:
        items = []
        for i in range(6):
            items.append({"role": "user", "content": f"step {i}: port module {i} to rust " * 6})
            items.append({**CALL, "call_id": f"call_{i}", "arguments": f'{{"city":"c{i}"}}'})
            items.append({**OUTPUT, "call_id": f"call_{i}", "output": f"weather {i} " * 10})
        run(session.add_items(items))
        result = session.store.compact("conv-1", summarizer="extractive", keep_recent_tokens=80)
        assert result.turn is not None
        after = run(session.get_items())
        assert after[0]["role"] == "user" and "<summary>" in after[0]["content"]
        kept = after[1:]
        assert kept == items[-len(kept) :]  # the kept tail comes back exactly
        assert kept[0].get("type") != "function_call_output"  # a call is never cut from its output


# -- a full Runner.run with a scripted model, no network ------------------------------


if HAVE_SDK:

    class ScriptedModel(Model):
        """Returns the next scripted output on each call and records the input it got."""

        def __init__(self, outputs: list[list[Any]]) -> None:
            self.outputs = list(outputs)
            self.inputs: list[Any] = []

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            self.inputs.append(json.loads(json.dumps(input, default=str)))
            return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    @function_tool
    def get_weather(city: str) -> str:
        """Return the weather in a city."""
        return f"sunny in {city}"


def text_output(text: str, id: str) -> Any:
    return ResponseOutputMessage(
        id=id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call_output(call_id: str, city: str) -> Any:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        type="function_call",
        call_id=call_id,
        name="get_weather",
        arguments=json.dumps({"city": city}),
    )


@requires_sdk
class TestRunner:
    def test_two_runs_share_the_history(self, session: NexusSession) -> None:
        model = ScriptedModel(
            [
                [call_output("call_a", "Paris")],
                [text_output("It is sunny in Paris.", "msg_a")],
                [text_output("You asked about Paris.", "msg_b")],
            ]
        )
        agent = Agent(name="weather", instructions="Answer.", model=model, tools=[get_weather])
        first = run(Runner.run(agent, "Weather in Paris?", session=session))
        assert first.final_output == "It is sunny in Paris."
        second = run(Runner.run(agent, "What did I ask?", session=session))
        assert second.final_output == "You asked about Paris."
        # the third model call saw the whole first run from the store
        seen = model.inputs[-1]
        assert seen[0] == {"content": "Weather in Paris?", "role": "user"}
        assert any(i.get("type") == "function_call_output" for i in seen)
        assert seen[-1] == {"content": "What did I ask?", "role": "user"}
        items = run(session.get_items())
        assert [i.get("type", "message") for i in items] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message",
            "message",
        ]
        # stored as pi messages: SQL sees the tool result under its tool's name
        row = session.store.conn.execute(
            "select tool_name, text from messages where role = 'toolResult'"
        ).fetchone()
        assert row == ("get_weather", "sunny in Paris")
        assert session.store.search("sunny", tool="get_weather")[0].role == "toolResult"

    def test_same_items_as_the_sdks_own_sqlite_session(self, tmp_path: Path) -> None:
        """Run one script against SQLiteSession and NexusSession: same history."""

        def script() -> ScriptedModel:
            return ScriptedModel(
                [
                    [call_output("c1", "Oslo")],
                    [text_output("Cold.", "m1")],
                    [text_output("Bye.", "m2")],
                ]
            )

        results = []
        for session in (
            SQLiteSession("x", tmp_path / "sdk.db"),
            NexusSession("x", tmp_path / "n.db"),
        ):
            agent = Agent(name="a", model=script(), tools=[get_weather])
            run(Runner.run(agent, "Oslo?", session=session))
            run(Runner.run(agent, "Thanks", session=session))
            results.append(run(session.get_items()))
            session.close()
        assert results[0] == results[1]


# -- the SDK's own session test patterns, run against NexusSession ---------------------


@requires_sdk
class TestSdkPatterns:
    def test_basic_functionality(self, session: NexusSession) -> None:
        items = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there!"},
        ]
        run(session.add_items(items))
        assert run(session.get_items()) == items
        assert run(session.pop_item()) == items[1]
        assert run(session.get_items()) == items[:1]
        run(session.clear_session())
        assert run(session.get_items()) == []

    def test_add_empty_list_is_a_no_op(self, session: NexusSession) -> None:
        run(session.add_items([]))
        assert run(session.get_items()) == []
        assert session.store.get_session("conv-1").turn_count == 0

    def test_pop_on_empty_session(self, session: NexusSession) -> None:
        assert run(session.pop_item()) is None

    def test_get_items_with_limit(self, session: NexusSession) -> None:
        items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
        run(session.add_items(items))
        assert run(session.get_items(limit=3)) == items[-3:]
        assert run(session.get_items(limit=1)) == items[-1:]
        assert run(session.get_items(limit=20)) == items

    def test_unicode_and_special_characters(self, session: NexusSession) -> None:
        items = [
            {"role": "user", "content": "こんにちは 😊 👍"},
            {"role": "assistant", "content": 'O\'Reilly "quotes" \\ backslash; DROP TABLE x; --'},
            {"role": "user", "content": "\u0000 nul and \ud800 lone surrogate"},
        ]
        run(session.add_items(items))
        assert run(session.get_items()) == items

    def test_concurrent_access(self, session: NexusSession) -> None:
        async def writer(n: int) -> None:
            await session.add_items([{"role": "user", "content": f"m{n}-{i}"} for i in range(5)])

        async def main() -> None:
            await asyncio.gather(*(writer(n) for n in range(5)))

        run(main())
        items = run(session.get_items())
        assert len(items) == 25
        assert len({i["content"] for i in items}) == 25

    def test_runner_with_session_limit(self, tmp_path: Path) -> None:
        model = ScriptedModel([[text_output(f"a{i}", f"m{i}")] for i in range(3)])
        agent = Agent(name="a", model=model)
        with NexusSession("lim", tmp_path / "l.db") as session:
            for i in range(3):
                run(Runner.run(agent, f"q{i}", session=session))
            run(
                Runner.run(
                    Agent(name="a", model=ScriptedModel([[text_output("x", "mx")]])),
                    "last",
                    session=session,
                    run_config=RunConfig(session_settings=SessionSettings(limit=2)),
                )
            )
            assert len(run(session.get_items())) == 8


# -- cost: reads and pops follow the limit, not the history ---------------------------


def _vm_steps(session: NexusSession, work: Any) -> int:
    """SQLite virtual-machine steps ``work`` costs (a count, not a time: load-proof)."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    session.store.conn.set_progress_handler(tick, 1)
    try:
        run(work())
    finally:
        session.store.conn.set_progress_handler(None, 1)
    return steps[0]


class TestCostFollowsTheLimit:
    """``get_items(limit=N)`` and ``pop_item`` cost O(N), not O(history) (issue 16).

    A pop once re-read the session, whose turn count scans every turn: 20k items made
    it 5x slower than SQLiteSession. The steps at 60 and at 2,400 items must be equal
    within a small constant.
    """

    @pytest.mark.parametrize("advanced", [False, True])
    def test_tail_read_and_pop_do_not_grow_with_history(
        self, tmp_path: Path, advanced: bool
    ) -> None:
        from nexus_store.openai_agents import NexusAdvancedSession

        costs = []
        for size in (60, 2_400):
            items = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"item {i}"}
                for i in range(size)
            ]
            path = tmp_path / f"{advanced}-{size}.db"
            session = NexusAdvancedSession("s", path) if advanced else NexusSession("s", path)
            try:
                run(session.add_items(items))
                get = _vm_steps(session, lambda s=session: s.get_items(limit=10))
                pop = _vm_steps(session, lambda s=session: s.pop_item())
                assert run(session.get_items(limit=2)) == items[-3:-1]
                clear = _vm_steps(session, lambda s=session: s.clear_session())
                assert run(session.get_items()) == []
            finally:
                session.close()
            costs.append((get, pop, clear))
        for small, big in zip(costs[0], costs[1], strict=True):
            assert big <= small + 50, costs


# -- EncryptedSession over a NexusSession --------------------------------------------


@requires_sdk
class TestEncryptedSession:
    """A wrong key must not pop items out of the visible conversation (issue 16)."""

    def test_wrong_key_pop_changes_nothing_and_the_right_key_pops(self, tmp_path: Path) -> None:
        pytest.importorskip("cryptography")
        from agents.extensions.memory import EncryptedSession
        from cryptography.fernet import InvalidToken

        path = tmp_path / "e.db"

        async def go() -> tuple[Any, ...]:
            base = NexusSession("s", path)
            right = EncryptedSession("s", base, encryption_key="right key")
            wrong = EncryptedSession("s", base, encryption_key="wrong key")
            await right.add_items([USER, ASSISTANT_EASY])
            with pytest.raises(InvalidToken):
                await wrong.pop_item()
            after_wrong = await right.get_items()
            popped = await right.pop_item()
            left = await right.get_items()
            base.close()
            return after_wrong, popped, left

        after_wrong, popped, left = run(go())
        assert after_wrong == [USER, ASSISTANT_EASY]
        assert popped == ASSISTANT_EASY
        assert left == [USER]

    def test_is_a_sqlite_session_only_while_the_sdk_pop_delegates(self) -> None:
        from nexus_store.openai_agents.session import delegates_to_validation

        NexusSession("x").close()  # registers
        assert isinstance(NexusSession("y"), SQLiteSession)
        assert delegates_to_validation(SQLiteSession.__dict__["pop_item"])
        assert NexusSession.pop_item is SQLiteSession.pop_item

        async def reaches_inside(self: Any) -> Any:
            return self._get_connection().execute("delete from agent_messages")

        assert not delegates_to_validation(reaches_inside)
        assert not delegates_to_validation(None)
