"""nexus_store through its public API (DESIGN.md "The smallest public surface").

Setup appends entries inside ``store.atomic()`` batches; a live append is one
``append_entry`` call (its own transaction); context is ``store.context(session_id)``,
status is ``store.status(session_id)``. Entries keep their pi ids and parentIds, so leaf
ids are the same for every peer. Runs from source: put the repository root on PYTHONPATH
(run.py does this).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Peer, batched


class NexusPeer(Peer):
    """nexus_store.Store, WAL + synchronous NORMAL by default, FULL on request."""

    name = "nexus_store"
    compaction = True
    branches = True

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        from nexus_store import Store

        self.durability = f"WAL {synchronous}"
        self.path = self.dir / "nexus.db"
        if synchronous == "NORMAL":
            self.store = Store(str(self.path))
        else:
            self.store = Store(str(self.path), synchronous=synchronous)
        self.sid = self.store.create_session(cwd="/repo").id
        self.closed = False

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import nexus_store
        except ImportError as err:
            return f"nexus_store not importable ({err})"
        if not hasattr(nexus_store, "Store"):
            return "nexus_store.Store not there yet (core store not merged)"
        return None

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        for chunk in batched(entries, 5000):
            with self.store.atomic():
                for e in chunk:
                    self.store.append_entry(self.sid, e)

    def append_one(self, entry: dict[str, Any]) -> None:
        self.store.append_entry(self.sid, entry)

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        with self.store.atomic():
            for e in entries:
                self.store.append_entry(self.sid, e)

    def context(self, leaf_id: str | None = None) -> int:
        if leaf_id is None:
            return len(self.store.context(self.sid).messages)
        return len(self.store.context(self.sid, leaf_id=leaf_id).messages)

    def status(self) -> int:
        return int(self.store.status(self.sid).tokens)

    def fork(self, parent_id: str, entry: dict[str, Any]) -> str:
        return str(self.store.append_entry(self.sid, dict(entry, parentId=parent_id)).id)

    def disk_bytes(self) -> int:
        # Closing checkpoints the WAL into the main file; the harness measures last.
        self.close()
        return super().disk_bytes()

    def close(self) -> None:
        if not self.closed:
            self.store.close()
            self.closed = True
