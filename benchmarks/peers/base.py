"""The interface every peer implements, and the pieces they share.

A peer owns one directory. ``build`` loads a history as fast as the peer allows (setup,
never timed), ``append_one`` writes one turn in its own transaction (timed per call by
the harness), ``context`` loads the messages the model would see for a leaf (timed), and
``disk_bytes`` measures what it left on disk. Entries are pi v3 dicts from workload.py;
each peer maps them to its own model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar


class Peer:
    """One store under test; subclasses override what they support."""

    name: ClassVar[str] = "peer"
    #: The largest history this peer is asked to build (None: no limit).
    max_turns: ClassVar[int | None] = None
    #: Whether the peer knows compaction (context with a compaction near the leaf).
    compaction: ClassVar[bool] = False
    #: Whether the peer can hold branches (the 100-branch workload).
    branches: ClassVar[bool] = False
    #: Whether one batched transaction of many appends exists in its API.
    batch: ClassVar[bool] = True
    #: Durability the peer runs at, printed beside its append rate.
    durability: ClassVar[str] = ""

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.synchronous = synchronous

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this peer cannot run here, or None."""
        return None

    # -- setup (untimed) --------------------------------------------------------------
    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        """Load a whole history quickly (batched); the leaf is the last entry."""
        raise NotImplementedError

    # -- timed operations --------------------------------------------------------------
    def append_one(self, entry: dict[str, Any]) -> None:
        """Append one turn in its own transaction, as a live agent does."""
        raise NotImplementedError

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        """Append many turns in one transaction."""
        raise NotImplementedError

    def context(self, leaf_id: str | None = None) -> int:
        """Load the context of the newest leaf (or ``leaf_id``); returns the message count."""
        raise NotImplementedError

    def status(self) -> int:
        """Tokens in the newest leaf's context (for stores that can say)."""
        raise NotImplementedError

    # -- branches ----------------------------------------------------------------------
    def fork(self, parent_id: str, entry: dict[str, Any]) -> str:
        """Append ``entry`` as a child of ``parent_id`` (a new branch); returns a leaf handle."""
        raise NotImplementedError

    # -- teardown ----------------------------------------------------------------------
    def disk_bytes(self) -> int:
        """Bytes this peer's files take on disk (after close or checkpoint)."""
        return dir_bytes(self.dir)

    def close(self) -> None:
        """Release connections and processes."""


def dir_bytes(path: Path) -> int:
    """Sum of file sizes under ``path`` (WAL and -shm included)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def batched(it: Iterable[Any], n: int) -> Iterator[list[Any]]:
    """Lists of up to ``n`` items from ``it``."""
    it = iter(it)
    while chunk := list(islice(it, n)):
        yield chunk


def message_text(m: dict[str, Any]) -> str:
    """The flattened text of a pi message (text blocks and tool-call arguments)."""
    c = m.get("content", "")
    if isinstance(c, str):
        return c
    parts = []
    for b in c:
        if b.get("type") == "text":
            parts.append(b["text"])
        elif b.get("type") == "toolCall":
            parts.append(str(b.get("arguments", "")))
    return "\n".join(parts)
