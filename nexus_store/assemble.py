"""Turning the rows of the context query into pi agent messages (no SQL here).

pi's ``buildSessionContext`` (packages/coding-agent/src/core/session-manager.ts) is
the contract: for a leaf, the latest compaction on its path gives a
``compactionSummary`` message first, then the turns from its first kept turn up to
it, then the turns after it; ``message`` turns give their messages,
``custom_message`` turns a ``custom`` message, ``branch_summary`` turns with a
truthy summary a ``branchSummary`` message. The store's query already selected and
ordered the rows; this module builds the message objects exactly as pi does,
including its quirks: a key the entry lacks is absent (JavaScript drops
``undefined``), and timestamps are ``new Date(entry.timestamp).getTime()`` (NaN,
which JSON writes as null, becomes None).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from nexus_store import jsoncodec
from nexus_store.rows import decode_message

__all__ = ["ABSENT", "build_messages", "js_date_ms", "js_truthy"]


class _Absent:
    """Marker for a key the entry does not have (JavaScript's undefined)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

_ISO = re.compile(
    r"^(?P<year>[+-]\d{6}|\d{4})"
    r"(?:-(?P<month>\d{2})(?:-(?P<day>\d{2}))?)?"
    r"(?:[T ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?)?$",
    re.IGNORECASE,
)
_MAX_TIME = 8.64e15


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Howard Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian calendar.
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _parse_date_string(text: str) -> float | None:
    match = _ISO.match(text.strip())
    if not match:
        return None
    year = int(match["year"])
    month = int(match["month"] or 1)
    day = int(match["day"] or 1)
    hour = int(match["hour"] or 0)
    minute = int(match["minute"] or 0)
    second = int(match["second"] or 0)
    millis = int((match["fraction"] or "0")[:3].ljust(3, "0"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute <= 59 and second <= 59):
        return None
    if hour > 24 or (hour == 24 and (minute or second or millis)):
        return None
    value = (
        _days_from_civil(year, month, day) * 86_400_000
        + hour * 3_600_000
        + minute * 60_000
        + second * 1000
        + millis
    )
    zone = match["zone"]
    if zone and zone.upper() != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        value -= sign * (int(digits[:2]) * 3_600_000 + int(digits[2:]) * 60_000)
    # Without an offset pi reads a date-time in the machine's zone; nexus_store reads it
    # as UTC (the two agree on machines set to UTC).
    return float(value)


def js_date_ms(value: Any) -> int | None:
    """Return ``new Date(value).getTime()`` as JavaScript computes it; None for NaN.

    Args:
        value: An entry's timestamp value, or ABSENT when the entry has none.

    Returns:
        Epoch milliseconds, or None where JavaScript gives NaN (JSON null).
    """
    if value is ABSENT:
        return None
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        parsed = _parse_date_string(value)
        if parsed is None:
            return None
        number = parsed
    else:
        return None
    if math.isnan(number) or math.isinf(number) or abs(number) > _MAX_TIME:
        return None
    return int(number)  # TimeClip truncates toward zero


def js_truthy(value: Any) -> bool:
    """JavaScript truthiness (ABSENT is undefined, hence false)."""
    if value is ABSENT or value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if isinstance(value, (dict, list)):
        return True
    return bool(value)


# Columns of a context row, in the order the store's CONTEXT_SQL selects them.
_T_ID, _T_UID, _T_KIND, _T_CREATED, _T_SUMMARY, _T_TOKENS_BEFORE = range(6)
_T_FROM, _T_CUSTOM_TYPE, _T_DISPLAY, _T_DETAILS, _T_EXTRA = range(6, 11)
_M_IDX, _M_ROLE, _M_KIND, _M_CONTENT, _M_TEXT = range(11, 16)
_M_EXTRA = 24
_TOKENS = 25


def _fields(row: Sequence[Any]) -> dict[str, Any]:
    """The entry keys a synthetic message is built from (columns, then extra)."""
    fields: dict[str, Any] = {}
    if row[_T_CREATED] is not None:
        fields["timestamp"] = row[_T_CREATED]
    if row[_T_SUMMARY] is not None:
        fields["summary"] = row[_T_SUMMARY]
    if row[_T_TOKENS_BEFORE] is not None:
        fields["tokensBefore"] = row[_T_TOKENS_BEFORE]
    if row[_T_FROM] is not None:
        fields["fromId"] = row[_T_FROM]
    if row[_T_CUSTOM_TYPE] is not None:
        fields["customType"] = row[_T_CUSTOM_TYPE]
    if row[_T_DISPLAY] is not None:
        fields["display"] = bool(row[_T_DISPLAY])
    if row[_T_DETAILS] is not None:
        fields["details"] = jsoncodec.loads(row[_T_DETAILS])
    if row[_T_EXTRA]:
        fields.update(jsoncodec.loads(row[_T_EXTRA]))
    return fields


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not ABSENT:
        target[key] = value


def _message(row: Sequence[Any]) -> dict[str, Any]:
    return decode_message(
        row[_M_ROLE], row[_M_KIND], row[_M_CONTENT], row[_M_TEXT], row[16:_M_EXTRA], row[_M_EXTRA]
    )


def build_messages(
    rows: Iterable[Sequence[Any]], compaction_id: int | None
) -> tuple[list[Any], list[str], list[str], list[int]]:
    """Build pi agent messages from context rows.

    Args:
        rows: Rows of the context query, in context order (the latest compaction first).
        compaction_id: Internal id of the latest compaction on the path, or None.

    Returns:
        ``(messages, turn_ids, turn_kinds, tokens)``: the messages and, for each, its
        turn's id and kind and its stored token count.
    """
    messages: list[Any] = []
    turn_ids: list[str] = []
    kinds: list[str] = []
    tokens: list[int] = []
    last_turn = None
    for row in rows:
        kind = row[_T_KIND]
        if kind == "message":
            if row[_M_IDX] is not None:
                messages.append(_message(row))
            elif row[_T_ID] != last_turn:
                # A message entry whose "message" is not an object: pi pushes it as is.
                extra = jsoncodec.loads(row[_T_EXTRA]) if row[_T_EXTRA] else {}
                messages.append(extra.get("message"))
            else:
                continue
            turn_ids.append(row[_T_UID])
            kinds.append(kind)
            tokens.append(row[_TOKENS])
            last_turn = row[_T_ID]
            continue
        if row[_T_ID] == last_turn:
            continue
        last_turn = row[_T_ID]
        fields = _fields(row)
        stamp = js_date_ms(fields.get("timestamp", ABSENT))
        if kind == "custom_message":
            message: dict[str, Any] = {"role": "custom"}
            _put(message, "customType", fields.get("customType", ABSENT))
            if row[_M_IDX] is not None:
                content = _message(row).get("content", ABSENT)
            else:
                content = fields.get("content", ABSENT)
            _put(message, "content", content)
            _put(message, "display", fields.get("display", ABSENT))
            _put(message, "details", fields.get("details", ABSENT))
            message["timestamp"] = stamp
        elif kind == "branch_summary":
            summary = fields.get("summary", ABSENT)
            if not js_truthy(summary):
                continue
            message = {"role": "branchSummary", "summary": summary}
            _put(message, "fromId", fields.get("fromId", ABSENT))
            message["timestamp"] = stamp
        elif kind == "compaction":
            if row[_T_ID] != compaction_id:
                continue
            message = {"role": "compactionSummary"}
            _put(message, "summary", fields.get("summary", ABSENT))
            _put(message, "tokensBefore", fields.get("tokensBefore", ABSENT))
            message["timestamp"] = stamp
        else:
            continue
        messages.append(message)
        turn_ids.append(row[_T_UID])
        kinds.append(kind)
        tokens.append(row[_TOKENS])
    return messages, turn_ids, kinds, tokens
