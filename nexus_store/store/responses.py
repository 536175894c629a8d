"""Claude Code usage counted once across the store: the rows of ``response_usage``.

A part that takes the `Handle` (no mixin). Claude Code repeats an API response's
message id, request id and usage on every line of the response, and a resumed session
copies earlier history into a new file. Within one file the reader gives usage to the
first line of each response only; across files, this part says whether another
session already carries a response's usage (the reader then gives it none: the line's
own usage stays in its ``ccMessage``), and records the responses a stored session now
carries, in the transaction that stored them.
"""

from __future__ import annotations

import json
from typing import Any

from nexus_store.formats.claude_code import response_key
from nexus_store.store.db import Handle

__all__ = ["ResponseUsage"]

_COUNTED_ELSEWHERE_SQL = (
    "select 1 from response_usage r join turns t on t.id = r.turn_id "
    "join sessions s on s.id = t.session_id "
    "where r.response_key = ? and not (s.source_format = ? and s.source_id = ?) limit 1"
)
# The assistant messages with usage among the turns a session stored after a seq.
_NEW_USAGE_SQL = (
    "select t.id, t.extra_json from turns t join messages m on m.turn_id = t.id "
    "where t.session_id = ? and t.seq > ? and m.role = 'assistant' "
    "and m.total_tokens is not null order by t.seq"
)
_INSERT_SQL = (
    "insert into response_usage (response_key, turn_id) values (?, ?) "
    "on conflict (response_key) do nothing"
)


class ResponseUsage:
    """Which stored turn carries each Claude Code response's usage.

    Args:
        db: The handle (its ``execute`` is the one path to the driver).
    """

    def __init__(self, db: Handle) -> None:
        self.db = db

    def counted_elsewhere(self, source_format: str, source_id: str, key: str) -> bool:
        """Whether a session other than (format, source id) already carries a response's usage.

        Args:
            source_format: The reading session's format (``claude_code``).
            source_id: The reading session's source id (its own turns do not count).
            key: The response's key (`nexus_store.formats.claude_code.response_key`).
        """
        row = self.db.execute(_COUNTED_ELSEWHERE_SQL, [key, source_format, source_id]).fetchone()
        return row is not None

    def last_seq(self, source_format: str, source_id: str) -> int:
        """The session's last stored seq (-1 when it is not stored yet)."""
        row = self.db.execute(
            "select last_seq from sessions where source_format = ? and source_id = ?",
            [source_format, source_id],
        ).fetchone()
        return -1 if row is None or row[0] is None else int(row[0])

    def record(self, source_format: str, source_id: str, after_seq: int) -> int:
        """Record the responses whose usage the session's turns after ``after_seq`` carry.

        Call it in the transaction that stored those turns. A response another
        session recorded first keeps its turn.

        Args:
            source_format: The session's format.
            source_id: The session's source id.
            after_seq: Its last seq before the turns just stored (`last_seq`).

        Returns:
            The responses recorded.
        """
        row = self.db.execute(
            "select id from sessions where source_format = ? and source_id = ?",
            [source_format, source_id],
        ).fetchone()
        if row is None:
            return 0
        found: list[tuple[str, int]] = []
        for turn_id, extra_json in self.db.execute(_NEW_USAGE_SQL, [row[0], after_seq]):
            key = _key_of(extra_json)
            if key is not None:
                found.append((key, int(turn_id)))
        for key, turn_id in found:
            self.db.execute(_INSERT_SQL, [key, turn_id])
        return len(found)


def _key_of(extra_json: Any) -> str | None:
    if not extra_json:
        return None
    extra = json.loads(extra_json)
    api = extra.get("ccMessage")
    if not isinstance(api, dict):
        return None
    return response_key(api.get("id"), extra.get("requestId"))
