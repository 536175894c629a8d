"""The entry/row codec is exact: whatever JSON values an entry holds come back identical."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.rows import TURN_FIELD_COLUMNS

ANY_TEXT = st.text(max_size=20)  # includes lone surrogates
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3)
    ),
    max_leaves=8,
)
ENTRY_KEYS = [key for key, _, _ in TURN_FIELD_COLUMNS] + ["extraKey", "content", "message"]
MESSAGE_KEYS = [
    "role",
    "content",
    "toolCallId",
    "toolName",
    "isError",
    "provider",
    "model",
    "api",
    "stopReason",
    "timestamp",
    "usage",
    "output",
    "details",
    "weird",
]


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values, types included (1 is not 1.0, True is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@st.composite
def odd_entries(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "message",
                "custom_message",
                "compaction",
                "branch_summary",
                "label",
                "model_change",
                "custom",
                "never_seen_before",
            ]
        )
    )
    entry: dict[str, Any] = {"type": kind, "id": "x1", "parentId": None}
    for key in draw(st.lists(st.sampled_from(ENTRY_KEYS), unique=True, max_size=6)):
        entry[key] = draw(JSON)
    if kind == "message" and draw(st.booleans()):
        message = {
            k: draw(JSON)
            for k in draw(st.lists(st.sampled_from(MESSAGE_KEYS), unique=True, max_size=8))
        }
        if draw(st.booleans()):
            message["content"] = draw(
                st.sampled_from(
                    [
                        "plain",
                        [{"type": "text", "text": "one block"}],
                        [
                            {"type": "text", "text": "a"},
                            {"type": "image", "data": "AA==", "mimeType": "image/png"},
                        ],
                        [{"type": "text", "text": "\ud800 lone"}],
                    ]
                )
            )
        if draw(st.booleans()):
            message["role"] = "bashExecution"
            message["output"] = draw(ANY_TEXT)
        entry["message"] = message
    return entry


@settings(max_examples=150, deadline=None)
@given(odd_entries())
def test_any_entry_round_trips_exactly(entry: dict[str, Any]) -> None:
    with Store(memory=True, counter="chars4") as store:
        sid, counts = store.ingest(
            {"type": "session", "id": "s"}, [(1, entry, None)], source_format="pi", source_id="s"
        )
        assert counts.turns == 1
        (turn,) = store.iter_turns(sid)
        assert same(turn.entry, entry), (turn.entry, entry)
        # and the context builder copes with whatever it is (no exception)
        store.context(sid)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(MESSAGE_KEYS), JSON, max_size=8))
def test_any_message_round_trips_through_native_append(message: dict[str, Any]) -> None:
    message["role"] = "user"
    with Store(memory=True, counter="chars4") as store:
        sid = store.create_session().id
        turn = store.append_message(sid, message)
        assert same(store.get_turn(sid, turn.id).entry["message"], message)
        assert same(store.context(sid).messages, [message])


def test_stored_turn_is_model_construct() -> None:
    """`models.stored_turn` (the append's and the reader's fast path) equals model_construct."""
    import copy
    import pickle

    from nexus_store.models import Turn, stored_turn

    values: dict[str, Any] = {
        "id": "abcd1234",
        "session_id": "s1",
        "parent_id": None,
        "kind": "message",
        "seq": 0,
        "timestamp": "2026-11-23T00:00:00.000Z",
        "depth": 0,
        "tokens": 5,
        "path_tokens": 5,
        "context_tokens": 5,
        "compactions": 0,
        "compaction_id": None,
        "model": {"provider": "p", "modelId": "m"},
        "thinking_level": "off",
        "entry": {"type": "message", "message": {"role": "user", "content": "hi"}},
    }
    fast, slow = stored_turn(**values), Turn.model_construct(**values)
    assert fast == slow and fast.model_dump() == slow.model_dump() == values
    assert fast.model_dump_json() == slow.model_dump_json() and repr(fast) == repr(slow)
    assert fast.model_fields_set == slow.model_fields_set == set(values)
    assert pickle.loads(pickle.dumps(fast)) == slow
    assert copy.deepcopy(fast) == slow and fast.model_copy(update={"seq": 1}).seq == 1
    assert Turn.model_validate(fast.model_dump()) == fast
    with pytest.raises(ValueError):
        fast.seq = 2  # type: ignore[misc]  # frozen, as the models are
    reordered = dict(reversed(list(values.items())))
    assert stored_turn(**reordered) == slow  # out of order: model_construct itself
