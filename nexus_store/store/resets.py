"""OpenClaw ``reset`` entries in context assembly: a reset starts a new context window.

OpenClaw (2026.8+) writes a ``reset`` entry when a conversation is reset in place
(``{"type": "reset", "id", "parentId", "reason", "firstKeptEntryId"?}``). Its context
builder (agent-core ``session.ts``: ``resolveSessionContextWindow``) cuts a path at
its latest boundary, a compaction or a reset: after a reset, the context is the
entries after it, preceded (when the reset has a ``firstKeptEntryId`` on the path,
OpenClaw's "preserve-tail" reset) by the user and assistant messages from that entry
up to the reset and the tool results paired with their calls there
(``selectResetKeptEntries``); no summary message, and a compaction before the reset
no longer counts. Model and thinking level still come from the whole path.

pi writes no reset entries, so a session without any keeps pi's semantics and pays
one indexed look-up (``turns_resets``) per assembly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nexus_store.store.db import Handle
from nexus_store.store.sql import PATH_SQL, PG_PATH_SQL

__all__ = ["ResetWindow", "latest_reset"]

_HAS_RESET_SQL = "select 1 from turns where session_id = ? and kind = 'reset' limit 1"
# Per dialect (keyed by its path statement, sql.PATH_SQL / PG_PATH_SQL): the deepest reset
# on the path from :leaf down to :stop_depth, and the turns of that path.
_RESET_ON_PATH_SQL = {
    path: "select t.id, t.depth, t.first_kept_uid from turns t where t.kind = 'reset' "
    f"and t.id in ({path}) order by t.depth desc limit 1"
    for path in (PATH_SQL, PG_PATH_SQL)
}
_PATH_UIDS_SQL = {
    path: f"select t.id, t.uid from turns t where t.id in ({path}) and t.id <> :leaf"
    for path in (PATH_SQL, PG_PATH_SQL)
}


@dataclass
class ResetWindow:
    """The latest reset on a leaf's path and the context window it starts.

    Attributes:
        stop_depth: The depth the context starts at (the first kept turn's, or the
            reset's own when it keeps nothing).
        retained: Uids of the turns from the first kept turn up to the reset, whose
            messages are filtered as OpenClaw keeps them.
    """

    stop_depth: int
    retained: set[str] = field(default_factory=set)

    def keep(
        self, messages: list[Any], turn_ids: list[str], kinds: list[str], tokens: list[int]
    ) -> tuple[list[Any], list[str], list[str], list[int]]:
        """Filter assembled messages as OpenClaw keeps those before a reset.

        In the retained window only user and assistant messages, and the tool results
        paired with a call there, are kept; the messages after the reset all are.

        Args:
            messages: The messages `build_messages` gave, in context order.
            turn_ids: Each message's turn uid.
            kinds: Each message's turn kind.
            tokens: Each message's token count.

        Returns:
            The same four lists, filtered.
        """
        pending: set[str] = set()
        kept = [
            n
            for n, (message, uid, kind) in enumerate(zip(messages, turn_ids, kinds, strict=True))
            if uid not in self.retained or self._kept(message, kind, pending)
        ]
        return (
            [messages[n] for n in kept],
            [turn_ids[n] for n in kept],
            [kinds[n] for n in kept],
            [tokens[n] for n in kept],
        )

    @staticmethod
    def _kept(message: Any, kind: str, pending: set[str]) -> bool:
        role = message.get("role") if isinstance(message, dict) and kind == "message" else None
        if role == "assistant":
            calls = _tool_call_ids(message)
            if calls:
                pending.clear()  # a new frame: results pair with this message's calls
                pending.update(calls)
            return True
        if role == "toolResult":
            call = message.get("toolCallId")
            if isinstance(call, str) and call in pending:
                pending.discard(call)
                return True
            return False
        return role == "user"


def _tool_call_ids(message: dict[str, Any]) -> set[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return set()
    return {
        block["id"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "toolCall"
        and isinstance(block.get("id"), str)
    }


def latest_reset(
    db: Handle, session_key: int, leaf_key: int, compaction_depth: int | None
) -> ResetWindow | None:
    """The latest reset on a leaf's path after its latest compaction, if any.

    Args:
        db: The handle.
        session_key: The leaf's session.
        leaf_key: The leaf turn's key.
        compaction_depth: The depth of the latest compaction on the path (None: none).

    Returns:
        The window the reset starts, or None (no reset after the latest compaction).
    """
    if db.execute(_HAS_RESET_SQL, [session_key]).fetchone() is None:
        return None
    path = db.dialect.statements.path
    floor = 0 if compaction_depth is None else compaction_depth + 1
    row = db.execute(
        _RESET_ON_PATH_SQL[path], {"leaf": leaf_key, "stop_depth": floor, "session": session_key}
    ).fetchone()
    if row is None:
        return None
    reset_key, reset_depth = int(row[0]), int(row[1])
    kept_uid = row[2]  # firstKeptEntryId (a string; anything else stays in extra_json)
    if not isinstance(kept_uid, str):
        return ResetWindow(reset_depth)
    kept = db.execute(
        "select id, depth from turns where session_id = ? and uid = ?", [session_key, kept_uid]
    ).fetchone()
    if kept is None or int(kept[1]) >= reset_depth:
        return ResetWindow(reset_depth)
    window = db.execute(
        _PATH_UIDS_SQL[path],
        {"leaf": reset_key, "stop_depth": int(kept[1]), "session": session_key},
    ).fetchall()
    if int(kept[0]) not in {int(r[0]) for r in window}:
        return ResetWindow(reset_depth)  # the first kept entry is not on the reset's path
    return ResetWindow(int(kept[1]), {str(r[1]) for r in window})
