"""Deterministic, realistic pi v3 session entries for the benchmarks.

A history of N turns is N pi v3 entries (one tree node each) after a session header:
a user message, then one to three tool rounds (an assistant message with text, a
``toolCall`` block and provider ``usage``, then a ``toolResult`` carrying 0.5-4 KB of
output), then an assistant answer, and again. Optionally a compaction entry every
``compact_every`` turns and one ``compaction`` entry a few turns before the leaf
(``compact_near_leaf``), keeping ``keep`` turns before it, as pi writes them.

Everything comes from ``random.Random(seed)`` and a fixed epoch, so two runs (and every
peer in one run) see byte-identical entries. Text is sliced from one pre-generated word
stream so that generating 200 MB stays cheap. Entries are yielded, never held in a list,
so a 1M-turn history never sits in memory.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH_MS = int(EPOCH.timestamp() * 1000)

_WORDS = (
    "the a of to and in is for that with on this file function test error return value "
    "import class def self data path config module build run check fix update add remove "
    "parse json sqlite session turn tree branch leaf parent context token compaction summary "
    "assistant user tool result output input line column index query table row insert select "
    "where order limit commit transaction journal wal sync fsync append read write open close "
    "src lib tests main util helper server client request response status code message text"
).split()
_TOOLS = ("bash", "read", "edit", "write", "grep")


def _corpus(seed: int, size: int = 1 << 20) -> str:
    rnd = random.Random(seed ^ 0x5EED)
    out: list[str] = []
    n = 0
    while n < size:
        w = rnd.choice(_WORDS)
        if rnd.random() < 0.08:
            w += ".\n" if rnd.random() < 0.3 else ","
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def entry_id(i: int) -> str:
    """pi-style 8-hex id; an odd multiplier mod 2**32 is a bijection, so ids never collide."""
    return format((i * 2654435761 + 0x9E3779B9) % (1 << 32), "08x")


class Generator:
    """Yields pi v3 entries; ``seq`` counts entries (turns) from 0."""

    def __init__(self, seed: int = 42) -> None:
        self.rnd = random.Random(seed)
        self.corpus = _corpus(seed)
        self.seq = 0
        self._plan: list[str] = []
        self._call = ""
        self._tool = "bash"

    def text(self, lo: int, hi: int) -> str:
        n = self.rnd.randint(lo, hi)
        start = self.rnd.randrange(0, len(self.corpus) - n - 1)
        return self.corpus[start : start + n]

    def _ts(self, i: int) -> tuple[str, int]:
        t = EPOCH + timedelta(seconds=i * 3)
        return t.isoformat().replace("+00:00", "Z"), EPOCH_MS + i * 3000

    def _usage(self) -> dict[str, Any]:
        inp = self.rnd.randint(200, 4000)
        out = self.rnd.randint(20, 800)
        cache = self.rnd.randint(0, 60000)
        cost = round(inp * 3e-6 + out * 15e-6 + cache * 3e-7, 6)
        return {
            "input": inp,
            "output": out,
            "cacheRead": cache,
            "cacheWrite": 0,
            "totalTokens": inp + out + cache,
            "cost": {
                "input": inp * 3e-6,
                "output": out * 15e-6,
                "cacheRead": cache * 3e-7,
                "cacheWrite": 0,
                "total": cost,
            },
        }

    def message(self) -> dict[str, Any]:
        """The next message of the conversation (a pi AgentMessage)."""
        _, ms = self._ts(self.seq)
        if not self._plan:
            rounds = self.rnd.randint(1, 3)
            self._plan = ["call", "result"] * rounds + ["answer"]
            return {"role": "user", "content": self.text(40, 400), "timestamp": ms}
        step = self._plan.pop(0)
        if step == "call":
            self._tool = self.rnd.choice(_TOOLS)
            self._call = f"toolu_{self.seq:010d}"
            return {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": self.text(40, 300)},
                    {
                        "type": "toolCall",
                        "id": self._call,
                        "name": self._tool,
                        "arguments": {"command": self.text(10, 80)},
                    },
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": self._usage(),
                "stopReason": "toolUse",
                "timestamp": ms,
            }
        if step == "result":
            return {
                "role": "toolResult",
                "toolCallId": self._call,
                "toolName": self._tool,
                "content": [{"type": "text", "text": self.text(500, 4000)}],
                "isError": self.rnd.random() < 0.05,
                "timestamp": ms,
            }
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": self.text(80, 1200)}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": self._usage(),
            "stopReason": "stop",
            "timestamp": ms,
        }


def header(session_id: str = "bench-session-0001") -> dict[str, Any]:
    """The pi v3 session header line."""
    return {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": EPOCH.isoformat().replace("+00:00", "Z"),
        "cwd": "/repo",
    }


def history(
    n: int,
    *,
    seed: int = 42,
    compact_near_leaf: bool = False,
    compact_every: int = 0,
    near: int = 40,
    keep: int = 40,
) -> Iterator[dict[str, Any]]:
    """Yield ``n`` linked pi v3 entries (a linear history; no header).

    Args:
        n: number of entries (turns).
        seed: random seed.
        compact_near_leaf: write a compaction entry ``near`` turns before the leaf that keeps
            the ``keep`` turns before it.
        compact_every: also write a compaction every this many turns (0: never).
        near: distance of the last compaction from the leaf.
        keep: turns kept before each compaction (``firstKeptEntryId``).
    """
    g = Generator(seed)
    parent: str | None = None
    compact_at = n - near if compact_near_leaf and n > near + keep + 1 else -1
    for i in range(n):
        g.seq = i
        iso, _ = g._ts(i)
        eid = entry_id(i)
        is_periodic = compact_every and i and i % compact_every == 0 and i < n - near - keep
        if i == compact_at or is_periodic:
            e: dict[str, Any] = {
                "type": "compaction",
                "id": eid,
                "parentId": parent,
                "timestamp": iso,
                "summary": "## Goal\n" + g.text(800, 2400),
                "firstKeptEntryId": entry_id(i - keep),
                "tokensBefore": 150_000 + i,
            }
        else:
            e = {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": iso,
                "message": g.message(),
            }
        yield e
        parent = eid


def write_jsonl(path: Path, entries: Iterator[dict[str, Any]], session_id: str = "") -> int:
    """Write a pi v3 file (header + entries); returns the entry count."""
    n = 0
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(header(session_id or "bench-" + path.stem)) + "\n")
        for e in entries:
            f.write(json.dumps(e, separators=(",", ":")) + "\n")
            n += 1
    return n


def payload_bytes(e: dict[str, Any]) -> int:
    """Bytes of text a turn carries (what 'bytes on disk / text payload' divides by)."""
    if e["type"] == "compaction":
        return len(e["summary"].encode())
    m = e["message"]
    c = m["content"]
    if isinstance(c, str):
        return len(c.encode())
    total = 0
    for b in c:
        if b["type"] == "text":
            total += len(b["text"].encode())
        elif b["type"] == "toolCall":
            total += len(json.dumps(b["arguments"]).encode())
    return total


def compaction_tail(
    n: int, *, seed: int = 42, near: int = 40, keep: int = 40
) -> list[dict[str, Any]]:
    """Entries that turn a plain ``history(n)`` into a compacted one: a compaction turn
    after the leaf that keeps the ``keep`` turns before it, then ``near - 1`` more turns.

    Used for the largest histories, where building a second copy just to move one
    compaction would double the setup time.
    """
    g = Generator(seed + 1)
    out: list[dict[str, Any]] = []
    parent = entry_id(n - 1)
    for i in range(n, n + near):
        g.seq = i
        iso, _ = g._ts(i)
        if i == n:
            e: dict[str, Any] = {
                "type": "compaction",
                "id": entry_id(i),
                "parentId": parent,
                "timestamp": iso,
                "summary": "## Goal\n" + g.text(800, 2400),
                "firstKeptEntryId": entry_id(n - keep),
                "tokensBefore": 150_000 + i,
            }
        else:
            e = {
                "type": "message",
                "id": entry_id(i),
                "parentId": parent,
                "timestamp": iso,
                "message": g.message(),
            }
        out.append(e)
        parent = e["id"]
    return out
