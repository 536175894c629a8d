"""LangGraph ``SqliteSaver``: the message list as graph state, one checkpoint per turn.

The state is ``{"messages": Annotated[list, operator.add]}`` (pi message dicts); each
turn is one ``graph.update_state(config, {"messages": [msg]})``, which writes one
checkpoint holding the whole list so far. Context is ``graph.get_state(config)``. The
checkpoint grows with the history, so storage and append cost grow quadratically; this
peer is only built up to ``max_turns`` turns.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from .base import Peer


class _State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


class LangGraphPeer(Peer):
    """langgraph.checkpoint.sqlite.SqliteSaver behind a one-node StateGraph."""

    name = "langgraph SqliteSaver"
    max_turns = 1000
    batch = False
    durability = "WAL FULL (default)"

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph

        self.conn = sqlite3.connect(str(self.dir / "langgraph.db"), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        g = StateGraph(_State)
        g.add_node("agent", lambda state: {})
        g.add_edge(START, "agent")
        g.add_edge("agent", END)
        self.graph = g.compile(checkpointer=self.saver)
        self.config: Any = {"configurable": {"thread_id": "bench"}}
        self.closed = False

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import langgraph.checkpoint.sqlite
            import langgraph.graph  # noqa: F401
        except ImportError as err:
            return f"langgraph / langgraph-checkpoint-sqlite not installed ({err})"
        return None

    def _msg(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        return [e["message"]] if e["type"] == "message" else []

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        # No batched API: a checkpoint per turn is the model. Setup pays it too.
        for e in entries:
            self.append_one(e)

    def append_one(self, entry: dict[str, Any]) -> None:
        self.graph.update_state(self.config, {"messages": self._msg(entry)}, as_node="agent")

    def context(self, leaf_id: str | None = None) -> int:
        return len(self.graph.get_state(self.config).values.get("messages", []))

    def disk_bytes(self) -> int:
        self.close()
        return super().disk_bytes()

    def close(self) -> None:
        if not self.closed:
            self.conn.close()
            self.closed = True
