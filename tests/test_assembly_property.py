"""Context assembly against the reference model, on random trees (hypothesis).

Trees branch anywhere; compactions keep from an ancestor, from a turn off the path,
or from a missing id; branch summaries come with and without text; custom,
custom_message, label, model and thinking changes are mixed in. For every turn as
leaf, the store's SQL assembly must equal the reference.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.tokens import CharsEstimator, message_tokens
from tests.reference import reference_context

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
STAMP = st.integers(min_value=1_600_000_000_000, max_value=1_900_000_000_000).map(
    lambda ms: (
        __import__("datetime")
        .datetime.fromtimestamp(ms / 1000, __import__("datetime").UTC)
        .strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{ms % 1000:03d}Z"
    )
)


def _maybe(d: dict[str, Any], key: str, value: Any, present: bool) -> dict[str, Any]:
    if present:
        d[key] = value
    return d


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom"]))
    if role == "user":
        content = draw(
            st.one_of(
                TEXT,
                st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=3),
                st.just([{"type": "image", "data": "aGk=", "mimeType": "image/png"}]),
            )
        )
        return {"role": "user", "content": content, "timestamp": draw(st.integers(0, 2**40))}
    if role == "assistant":
        blocks = draw(
            st.lists(
                st.one_of(
                    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
                    st.builds(lambda t: {"type": "thinking", "thinking": t}, TEXT),
                    st.builds(
                        lambda i, a: {
                            "type": "toolCall",
                            "id": i,
                            "name": "read",
                            "arguments": {"p": a},
                        },
                        TEXT,
                        TEXT,
                    ),
                ),
                max_size=3,
            )
        )
        m: dict[str, Any] = {"role": "assistant", "content": blocks, "timestamp": 5}
        _maybe(m, "provider", draw(st.sampled_from(["anthropic", "openai"])), draw(st.booleans()))
        _maybe(m, "model", draw(st.sampled_from(["m1", "m2"])), draw(st.booleans()))
        _maybe(
            m,
            "usage",
            {"input": 3, "output": 4, "totalTokens": 7, "cost": {"total": 0.5}},
            draw(st.booleans()),
        )
        return m
    if role == "toolResult":
        return {
            "role": "toolResult",
            "toolCallId": draw(TEXT),
            "toolName": draw(st.sampled_from(["read", "bash", "skill"])),
            "content": [{"type": "text", "text": draw(TEXT)}],
            "isError": draw(st.booleans()),
            "timestamp": 7,
        }
    if role == "bashExecution":
        return {
            "role": "bashExecution",
            "command": draw(TEXT),
            "output": draw(TEXT),
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": 9,
        }
    return {
        "role": "custom",
        "customType": "x",
        "content": draw(TEXT),
        "display": True,
        "timestamp": 3,
    }


KINDS = [
    "message",
    "message",
    "message",
    "message",
    "custom_message",
    "custom",
    "compaction",
    "branch_summary",
    "label",
    "model_change",
    "thinking_level_change",
    "session_info",
]


@st.composite
def trees(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=1, max_value=25))
    entries: list[dict[str, Any]] = []
    for i in range(n):
        kind = draw(st.sampled_from(KINDS))
        parent = None
        if entries and draw(st.integers(0, 9)) > 0:
            # mostly the previous entry (a conversation), sometimes anywhere (a branch)
            parent = (
                entries[-1]["id"] if draw(st.booleans()) else draw(st.sampled_from(entries))["id"]
            )
        e: dict[str, Any] = {"type": kind, "id": f"e{i:03d}", "parentId": parent}
        if draw(st.integers(0, 5)) > 0:
            e["timestamp"] = draw(STAMP)
        if kind == "message":
            e["message"] = draw(messages())
        elif kind == "custom_message":
            e["customType"] = "ext"
            e["content"] = draw(st.one_of(TEXT, st.just([{"type": "text", "text": "block"}])))
            e["display"] = draw(st.booleans())
            if draw(st.booleans()):
                e["details"] = {"k": draw(TEXT)}
        elif kind == "custom":
            e["customType"] = "state"
            e["data"] = {"v": draw(st.integers())}
        elif kind == "compaction":
            e["summary"] = draw(TEXT)
            choice = draw(st.sampled_from(["ancestor", "anywhere", "missing"]))
            if choice == "missing" or not entries:
                e["firstKeptEntryId"] = "nope"
            elif choice == "anywhere":
                e["firstKeptEntryId"] = draw(st.sampled_from(entries))["id"]
            else:
                chain = []
                cur = parent
                by_id = {x["id"]: x for x in entries}
                while cur is not None:
                    chain.append(cur)
                    cur = by_id[cur]["parentId"]
                e["firstKeptEntryId"] = draw(st.sampled_from(chain)) if chain else "nope"
            if draw(st.booleans()):
                e["tokensBefore"] = draw(st.integers(0, 10**6))
        elif kind == "branch_summary":
            e["summary"] = draw(st.sampled_from(["", "tried X; it failed"]))
            e["fromId"] = parent or "root"
        elif kind == "label":
            e["targetId"] = parent or "e000"
            e["label"] = draw(TEXT)
        elif kind == "model_change":
            _maybe(e, "provider", "prov", draw(st.booleans()))
            _maybe(e, "modelId", draw(st.sampled_from(["a", "b"])), draw(st.booleans()))
        elif kind == "thinking_level_change":
            _maybe(
                e,
                "thinkingLevel",
                draw(st.sampled_from(["low", "high", "off"])),
                draw(st.integers(0, 5)) > 0,
            )
        elif kind == "session_info":
            e["name"] = draw(TEXT)
        entries.append(e)
    return entries


def _ingest(store: Store, entries: list[dict[str, Any]]) -> str:
    sid, _ = store.ingest(
        {"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        ((i + 1, dict(e), None) for i, e in enumerate(entries)),
        source_format="pi",
        source_id="s",
    )
    return sid


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_context_of_every_turn_matches_the_reference(entries: list[dict[str, Any]]) -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = _ingest(store, entries)
        for e in entries:
            ctx = store.context(sid, e["id"])
            want = reference_context(entries, e["id"])
            assert ctx.messages == want["messages"], e["id"]
            assert ctx.model == want["model"]
            expected_thinking = want["thinking_level"]
            assert ctx.thinking_level == (
                expected_thinking if isinstance(expected_thinking, str) else None
            )
            assert len(ctx.turn_ids) == len(ctx.messages)
            counter = CharsEstimator()
            assert ctx.tokens == sum(message_tokens(counter, m) for m in ctx.messages)


@settings(max_examples=100, deadline=None)
@given(trees())
def test_every_entry_comes_back_exactly(entries: list[dict[str, Any]]) -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = _ingest(store, entries)
        stored = [t.entry for t in store.iter_turns(sid)]
        assert stored == entries
        # the path of each turn is the chain of parents
        by_id = {e["id"]: e for e in entries}
        for e in entries:
            chain = []
            cur: str | None = e["id"]
            while cur is not None:
                chain.insert(0, cur)
                cur = by_id[cur]["parentId"]
            assert [t.id for t in store.path(sid, e["id"])] == chain


@settings(max_examples=60, deadline=None)
@given(trees())
def test_native_appends_match_the_reference(entries: list[dict[str, Any]]) -> None:
    """The same trees written through append_entry (only valid compactions kept)."""
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        written: list[dict[str, Any]] = []
        for e in entries:
            if e["type"] == "compaction":
                chain = []
                by_id = {x["id"]: x for x in written}
                cur = e["parentId"] if e["parentId"] in by_id else None
                while cur is not None:
                    chain.append(cur)
                    cur = by_id[cur]["parentId"]
                if e["firstKeptEntryId"] not in chain:
                    continue
            if e["parentId"] is not None and e["parentId"] not in {x["id"] for x in written}:
                e = {**e, "parentId": None}
            turn = store.append_entry(sid, e)
            # the store stamps entries written without a timestamp, and nothing else
            assert {k: v for k, v in turn.entry.items() if k in e or k != "timestamp"} == e
            assert turn.entry == store.get_turn(sid, turn.id).entry
            written.append(turn.entry)
        for e in written:
            assert (
                store.context(sid, e["id"]).messages
                == reference_context(written, e["id"])["messages"]
            )
