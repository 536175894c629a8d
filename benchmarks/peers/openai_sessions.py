"""openai-agents ``SQLiteSession`` and ``AdvancedSQLiteSession`` (agents.memory).

A pi entry becomes Responses API input items: a user message, an assistant ``message``
with ``output_text`` plus one ``function_call`` per toolCall, or a
``function_call_output``. A live append is one ``add_items`` call (one transaction;
the SDK's own WAL connection at SQLite's default ``synchronous=FULL``); context is
``get_items()``, which reads every item of the session (or branch). Neither knows
compaction, so only histories without one are run. Branches (Advanced only) are
``create_branch_from_turn``, which copies the structure rows of the prefix, then
``add_items`` on the new branch; a branch forks before a user turn, so a fork point is
rounded to the next user turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Peer, batched, message_text


def to_items(e: dict[str, Any]) -> list[dict[str, Any]]:
    """Responses input items for one pi entry (none for entries without a message)."""
    if e["type"] != "message":
        return []
    m = e["message"]
    role = m["role"]
    if role == "user":
        return [{"role": "user", "content": message_text(m)}]
    if role == "toolResult":
        return [
            {"type": "function_call_output", "call_id": m["toolCallId"], "output": message_text(m)}
        ]
    items: list[dict[str, Any]] = []
    text = "\n".join(b["text"] for b in m["content"] if b["type"] == "text")
    if text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_" + e["id"],
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for b in m["content"]:
        if b["type"] == "toolCall":
            items.append(
                {
                    "type": "function_call",
                    "call_id": b["id"],
                    "name": b["name"],
                    "arguments": json.dumps(b["arguments"]),
                }
            )
    return items


class SQLiteSessionPeer(Peer):
    """agents.SQLiteSession: one flat table of items per session."""

    name = "openai SQLiteSession"
    durability = "WAL FULL (SDK default)"

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        self.loop = asyncio.new_event_loop()
        self.session = self._open()

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import agents  # noqa: F401
        except ImportError as err:
            return f"openai-agents not installed ({err})"
        return None

    def _open(self) -> Any:
        from agents import SQLiteSession

        return SQLiteSession("bench", str(self.dir / "openai.db"))

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        for chunk in batched(entries, 5000):
            self.run(self.session.add_items([i for e in chunk for i in to_items(e)]))

    def append_one(self, entry: dict[str, Any]) -> None:
        self.run(self.session.add_items(to_items(entry)))

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        self.run(self.session.add_items([i for e in entries for i in to_items(e)]))

    def context(self, leaf_id: str | None = None) -> int:
        return len(self.run(self.session.get_items()))

    def disk_bytes(self) -> int:
        self.close()
        return super().disk_bytes()

    def close(self) -> None:
        if not self.loop.is_closed():
            self.session.close()
            self.loop.close()


class AdvancedSQLiteSessionPeer(SQLiteSessionPeer):
    """agents.extensions.memory.AdvancedSQLiteSession: branches by copying structure rows."""

    name = "openai AdvancedSQLiteSession"
    branches = True

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        self.turn_of: dict[str, int] = {}
        self.turns = 0
        super().__init__(workdir, synchronous)

    def _open(self) -> Any:
        from agents.extensions.memory import AdvancedSQLiteSession

        return AdvancedSQLiteSession(
            session_id="bench", db_path=str(self.dir / "openai-adv.db"), create_tables=True
        )

    def _track(self, entries: list[dict[str, Any]]) -> None:
        for e in entries:
            if e["type"] == "message" and e["message"]["role"] == "user":
                self.turns += 1
            self.turn_of[e["id"]] = self.turns

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        for chunk in batched(entries, 5000):
            self._track(chunk)
            self.run(self.session.add_items([i for e in chunk for i in to_items(e)]))

    def append_one(self, entry: dict[str, Any]) -> None:
        self._track([entry])
        super().append_one(entry)

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        self._track(entries)
        super().append_batch(entries)

    def context(self, leaf_id: str | None = None) -> int:
        return len(self.run(self.session.get_items(branch_id=leaf_id)))

    def fork(self, parent_id: str, entry: dict[str, Any]) -> str:
        turn = min(max(self.turn_of[parent_id] + 1, 2), self.turns)
        branch = self.run(self.session.create_branch_from_turn(turn))
        self.run(self.session.add_items(to_items(entry)))
        self.run(self.session.switch_to_branch("main"))
        return str(branch)
