r"""Fast JSON for the hot paths (import, storage, assembly), exact for every value.

orjson parses and writes JSON two to three times faster than the standard library,
which matters for importing large transcripts and assembling long contexts. It
refuses lone surrogates (from ``\ud800`` escapes) and integers beyond 64 bits when
writing, and reads such integers as floats, so both functions fall back to the
standard library for those values: the result is always the value the standard
library would give.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["dumps", "loads"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# orjson reads integers beyond 64 bits as floats (silently): any run of 19 digits
# sends the text to the standard library, which keeps them exact.
_LONG_NUMBER = re.compile(r"\d{19}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19}")


def loads(data: str | bytes) -> Any:
    """Parse JSON text (str or UTF-8 bytes) like ``json.loads``."""
    long = (_LONG_NUMBER_BYTES if isinstance(data, bytes) else _LONG_NUMBER).search(data)  # type: ignore[arg-type]
    if long is None:
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
        if _SURROGATE.search(text):
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
        return text
