"""`jsoncodec.check` refuses exactly what ``json.dumps(value, allow_nan=False)`` refuses.

An append validates every entry field with it (issue 17: the fast path walks plain
values instead of serializing them); the standard library stays the judge.
"""

from __future__ import annotations

import enum
import json
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store import jsoncodec


class Colour(enum.Enum):
    RED = 1


class Text(str):
    pass


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64),
    st.floats(),  # NaN and Infinity included
    st.text(),
    st.builds(Text, st.text()),
    st.sampled_from([Colour.RED, uuid.UUID(int=7), object(), b"bytes", {1, 2}]),
)
KEYS = st.one_of(st.text(), st.integers(), st.none(), st.booleans(), st.floats())
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=20,
)


def outcome(call: Any) -> str:
    try:
        call()
    except (TypeError, ValueError, RecursionError) as err:
        return f"{type(err).__name__}: {err}"
    return "ok"


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_check_agrees_with_the_standard_library(value: Any) -> None:
    assert outcome(lambda: jsoncodec.check(value)) == outcome(
        lambda: json.dumps(value, allow_nan=False)
    )


def test_cycles_and_deep_nesting_go_to_the_standard_library() -> None:
    loop: list[Any] = []
    loop.append(loop)
    deep: Any = "leaf"
    for _ in range(150):
        deep = [deep]
    for value in (loop, deep, {"a": {"b": [float("nan")]}}):
        assert outcome(lambda v=value: jsoncodec.check(v)) == outcome(
            lambda v=value: json.dumps(v, allow_nan=False)
        )
