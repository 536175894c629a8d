"""A pi-style JSONL tree store in Python: what pi and OpenClaw (up to 2026.7.1) do.

One JSON line is appended per entry (open, write, close; never fsync, like pi's
``appendFileSync``). To load a leaf's context the whole file is read and parsed, an
id -> entry map is built, parents are walked from the leaf to the root, and pi's
``buildSessionContext`` rules (DESIGN.md "Context assembly") turn the path into messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workload import header

from .base import Peer


def build_context(entries: list[dict[str, Any]], leaf_id: str | None) -> list[dict[str, Any]]:
    """pi's context for ``leaf_id`` (default: the last entry) from a parsed file."""
    by_id = {e["id"]: e for e in entries if e.get("type") != "session"}
    if not by_id:
        return []
    leaf = by_id.get(leaf_id) if leaf_id else entries[-1]
    path: list[dict[str, Any]] = []
    while leaf is not None:
        path.append(leaf)
        leaf = by_id.get(leaf.get("parentId")) if leaf.get("parentId") else None
    path.reverse()
    comp = -1
    for i, e in enumerate(path):
        if e["type"] == "compaction":
            comp = i
    out: list[dict[str, Any]] = []

    def emit(e: dict[str, Any]) -> None:
        t = e["type"]
        if t == "message":
            out.append(e["message"])
        elif t == "custom_message":
            out.append({"role": "custom", "customType": e["customType"], "content": e["content"]})
        elif t == "branch_summary" and e.get("summary"):
            out.append({"role": "branchSummary", "summary": e["summary"], "fromId": e["fromId"]})

    if comp < 0:
        for e in path:
            emit(e)
        return out
    c = path[comp]
    out.append(
        {"role": "compactionSummary", "summary": c["summary"], "tokensBefore": c["tokensBefore"]}
    )
    kept = False
    for e in path[:comp]:
        kept = kept or e["id"] == c["firstKeptEntryId"]
        if kept:
            emit(e)
    for e in path[comp + 1 :]:
        emit(e)
    return out


class JsonlTreePeer(Peer):
    """pi's storage model in Python: append a line; load = read + parse + walk."""

    name = "jsonl-tree (py)"
    compaction = True
    branches = True
    durability = "no fsync"

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        self.path = self.dir / "session.jsonl"
        if not self.path.exists():
            self.path.write_text(json.dumps(header()) + "\n")

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            for e in entries:
                f.write(json.dumps(e, separators=(",", ":")) + "\n")

    def use_file(self, path: Path) -> None:
        """Read an already generated file (the harness shares one per history)."""
        self.path = path

    def append_one(self, entry: dict[str, Any]) -> None:
        # pi: appendFileSync opens, writes and closes the file for every entry.
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))

    def _load(self) -> list[dict[str, Any]]:
        with self.path.open("rb") as f:
            return [json.loads(line) for line in f if line.strip()]

    def context(self, leaf_id: str | None = None) -> int:
        return len(build_context(self._load(), leaf_id))

    def status(self) -> int:
        # No stored counts: parse everything, assemble, estimate chars/4 as pi does.
        msgs = build_context(self._load(), None)
        return sum(len(json.dumps(m)) for m in msgs) // 4

    def fork(self, parent_id: str, entry: dict[str, Any]) -> str:
        e = dict(entry, parentId=parent_id)
        self.append_one(e)
        return str(e["id"])

    def disk_bytes(self) -> int:
        return self.path.stat().st_size
