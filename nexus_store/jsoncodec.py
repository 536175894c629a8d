r"""Fast JSON for the hot paths (import, storage, assembly), exact for every value.

orjson parses and writes JSON two to three times faster than the standard library,
which matters for importing large transcripts and assembling long contexts. It
refuses lone surrogates (from ``\ud800`` escapes) and integers beyond 64 bits when
writing, and reads such integers as floats, so both functions fall back to the
standard library for those values: the result is always the value the standard
library would give.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import orjson

__all__ = ["check", "dumps", "has_lone_surrogate", "has_long_number", "loads"]

_SURROGATE = "[\ud800-\udfff]"  # compiled on first use: ~0.5 ms that every start paid (issue 17)
# orjson reads integers beyond 64 bits as floats (silently): any run of 19 digits
# sends the text to the standard library, which keeps them exact.
# For bytes: digits map to b"0", everything else to a space, then one substring
# search (two C passes, about six times faster than the regex on a transcript line).
_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN = b"0" * 19


def has_long_number(data: str | bytes) -> bool:
    """Whether ``data`` holds 19 digits in a row (maybe an integer orjson reads as a float)."""
    if isinstance(data, str):
        # a digit is one ASCII byte in UTF-8 and no byte of another character is one:
        # encoding and one translate pass is 20-40 times faster than the regex
        data = data.encode("utf-8", "surrogatepass")
    return _LONG_RUN in data.translate(_DIGITS)


def has_lone_surrogate(text: str) -> bool:
    r"""Whether ``text`` holds a lone surrogate (from a ``\ud800`` escape: not UTF-8)."""
    return not text.isascii() and _pattern(_SURROGATE).search(text) is not None


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def loads(data: str | bytes) -> Any:
    """Parse JSON text (str or UTF-8 bytes) like ``json.loads``."""
    if not has_long_number(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(value: Any) -> str:
    """Compact JSON (non-ASCII kept) that SQLite can store; lone surrogates escaped."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate, an int beyond 64 bits, or a non-JSON value
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if has_lone_surrogate(text):
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
        return text


def check(value: Any) -> None:
    """Raise what ``json.dumps(value, allow_nan=False)`` raises, without writing the JSON.

    A value made only of the plain JSON types (str, int, bool, None, finite floats,
    lists, tuples, dicts with string keys) is walked, never serialized: the walk looks
    at each node once and at no character of a string, where the standard library
    escapes every one (a message of a few KB costs it ~20 us). Anything else (a
    subclass, a non-string key, NaN, deep nesting) is decided by the standard library
    itself, so the answer is always its answer.

    Raises:
        TypeError: A value JSON cannot hold.
        ValueError: NaN or Infinity, or a circular reference.
        RecursionError: Nesting too deep for the standard library.
    """
    if not _plain(value, 0):
        json.dumps(value, allow_nan=False)


_SCALARS = frozenset({str, int, bool, type(None)})


def _plain(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth > 100:  # (a cycle ends here too)
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _plain(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            if not _plain(item, depth + 1):
                return False
        return True
    return False
