"""The stores compared by benchmarks/run.py, one module each, behind one small interface.

Every peer is driven through its public API only (see base.Peer); ``ALL`` lists them in
table order. A peer that cannot run here (package or node missing) says why through
``Peer.unavailable()`` and is skipped with a printed note.
"""

from __future__ import annotations

from .base import Peer
from .jsonl_tree import JsonlTreePeer
from .langgraph_saver import LangGraphPeer
from .nexus import NexusPeer
from .openai_sessions import AdvancedSQLiteSessionPeer, SQLiteSessionPeer
from .pi_node import PiNodePeer
from .raw_sqlite import RawSqlitePeer

ALL: list[type[Peer]] = [
    NexusPeer,
    RawSqlitePeer,
    JsonlTreePeer,
    PiNodePeer,
    SQLiteSessionPeer,
    AdvancedSQLiteSessionPeer,
    LangGraphPeer,
]

__all__ = ["ALL", "Peer"]
