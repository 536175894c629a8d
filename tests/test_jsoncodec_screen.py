"""The long-number screen of `nexus_store.jsoncodec`: exactly "19 ASCII digits in a row".

The screen decides which texts orjson may parse (it reads integers beyond 64 bits as
floats); for str it encodes and translates instead of running a regex (40 times faster on
assembly's message texts), so it is checked here against the plain definition.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from nexus_store import jsoncodec

ANY_CHAR = st.characters(blacklist_categories=())  # surrogates and other digits included
TEXT = st.lists(
    st.one_of(ANY_CHAR, st.sampled_from("0123456789"), st.just("1" * 18), st.just("٣")),
    max_size=60,
).map("".join)
ASCII_RUN = re.compile("[0-9]{19}")


@given(TEXT)
def test_screen_is_nineteen_ascii_digits(text: str) -> None:
    expected = ASCII_RUN.search(text) is not None
    assert jsoncodec.has_long_number(text) is expected
    assert jsoncodec.has_long_number(text.encode("utf-8", "surrogatepass")) is expected


def test_long_integers_stay_exact_and_other_digits_do_not_count() -> None:
    big = 12345678901234567890123
    assert jsoncodec.loads(f'{{"n": {big}, "s": "x"}}') == {"n": big, "s": "x"}
    assert not jsoncodec.has_long_number("٣" * 40)  # Arabic-Indic digits are no JSON number
    assert jsoncodec.has_long_number("é" + "9" * 19)
    assert not jsoncodec.has_long_number("9" * 18 + "x" + "9" * 18)
