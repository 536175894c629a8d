"""Issue 17's write table: turns per second and bytes on disk per text byte, side by side.

A turn is a user message and an assistant message, and on every 5th turn a 4 KB tool
result, written as one unit:

- nexus_store: ``Store.append_messages(sid, [...])`` (one turn carrying its messages);
- OpenAI Agents ``SQLiteSession``: ``add_items([...])`` (2-3 Responses items);
- a plain sqlite3 turn tree: one row in ``turns`` (id, parent, session, seq, time) and one
  row per message in ``messages`` (JSON body), with the indexes a tree needs.

Three ways of committing: one commit per turn at WAL + ``synchronous=FULL``, the same at
WAL + NORMAL (``SQLiteSession`` has no setting: it always runs at SQLite's default FULL,
so it shows "-" there), and all turns in one transaction (at each peer's default
durability). Then the files' size (database + WAL after closing) divided by the UTF-8
bytes of message text written, for the all-in-one-transaction stores.

``run_turns`` is called by ``run.py`` (``--only turns``); ``turns_table`` renders the
records as the issue's table.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODES = ("FULL", "NORMAL", "batch")
PEERS = ("nexus_store", "openai SQLiteSession", "plain sqlite3 turn tree")
WORDS = (
    "the store writes each turn once and reads the path from stored values "
    "agent tool result file diff test passed failed retry build import context token"
).split()


def turns(n: int, seed: int = 17) -> list[list[dict[str, Any]]]:
    """``n`` turns of pi agent messages (deterministic): user, assistant, every 5th a tool result."""
    rnd = random.Random(seed)

    def text(lo: int, hi: int) -> str:
        out: list[str] = []
        size = rnd.randint(lo, hi)
        while sum(len(w) + 1 for w in out) < size:
            out.append(rnd.choice(WORDS))
        return " ".join(out)[:size]

    result: list[list[dict[str, Any]]] = []
    for i in range(n):
        ts = 1_700_000_000_000 + i * 1000
        msgs: list[dict[str, Any]] = [
            {"role": "user", "content": text(40, 400), "timestamp": ts},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": text(80, 1200)}],
                "model": "bench-model",
                "stopReason": "stop",
                "timestamp": ts + 1,
            },
        ]
        if i % 5 == 4:
            msgs.append(
                {
                    "role": "toolResult",
                    "toolCallId": f"call_{i}",
                    "toolName": "bash",
                    "content": [{"type": "text", "text": text(4096, 4096)}],
                    "isError": False,
                    "timestamp": ts + 2,
                }
            )
        result.append(msgs)
    return result


def message_text(m: dict[str, Any]) -> str:
    """The text of one message (what the payload ratio divides by)."""
    c = m["content"]
    return c if isinstance(c, str) else "".join(b["text"] for b in c)


def payload_bytes(ts: list[list[dict[str, Any]]]) -> int:
    """UTF-8 bytes of all message texts."""
    return sum(len(message_text(m).encode()) for t in ts for m in t)


def disk_bytes(path: Path) -> int:
    """The database file plus its WAL and shared-memory files, if any."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


# -- the three stores ---------------------------------------------------------------------


class NexusTurns:
    """nexus_store through the Store API: one ``append_messages`` per turn."""

    name = PEERS[0]

    def __init__(self, path: Path, sync: str) -> None:
        from nexus_store import Store

        self.path = path
        self.store = Store(str(path), synchronous=sync)
        # Warm up: the token counter loads its encoding (~0.3-1 s) on first use, once
        # per process; that is start-up, not a turn's cost.
        warm = self.store.create_session(cwd="/warm-up").id
        self.store.append_message(warm, {"role": "user", "content": "warm up", "timestamp": 0})
        self.sid = self.store.create_session(cwd="/bench").id

    def turn(self, msgs: list[dict[str, Any]]) -> None:
        self.store.append_messages(self.sid, msgs)

    def batch(self, ts: list[list[dict[str, Any]]]) -> None:
        with self.store.atomic():
            for msgs in ts:
                self.store.append_messages(self.sid, msgs)

    def close(self) -> None:
        self.store.close()


def to_items(i: int, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Responses input items for one turn."""
    items: list[dict[str, Any]] = []
    for m in msgs:
        if m["role"] == "user":
            items.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": f"msg_{i}",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": message_text(m), "annotations": []}
                    ],
                }
            )
        else:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["toolCallId"],
                    "output": message_text(m),
                }
            )
    return items


class OpenAITurns:
    """agents.SQLiteSession: ``add_items`` per turn (its own WAL connection, FULL)."""

    name = PEERS[1]

    def __init__(self, path: Path, sync: str) -> None:
        from agents import SQLiteSession

        self.path = path
        self.loop = asyncio.new_event_loop()
        self.session = SQLiteSession("bench", str(path))
        self.i = 0

    def turn(self, msgs: list[dict[str, Any]]) -> None:
        self.i += 1
        self.loop.run_until_complete(self.session.add_items(to_items(self.i, msgs)))

    def batch(self, ts: list[list[dict[str, Any]]]) -> None:
        items = [it for i, msgs in enumerate(ts) for it in to_items(i, msgs)]
        self.loop.run_until_complete(self.session.add_items(items))

    def close(self) -> None:
        self.session.close()
        self.loop.close()


PLAIN_SCHEMA = """
create table turns (
    id integer primary key,
    session_id integer not null,
    parent_id integer references turns(id),
    seq integer not null,
    created_utc text not null
);
create index turns_parent on turns(parent_id);
create table messages (
    turn_id integer not null references turns(id),
    idx integer not null,
    role text not null,
    body text not null,
    primary key (turn_id, idx)
) without rowid;
"""


class PlainTurns:
    """A plain sqlite3 turn tree: a turn row and its message rows per commit."""

    name = PEERS[2]

    def __init__(self, path: Path, sync: str) -> None:
        import json

        self.dumps = json.dumps
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("pragma journal_mode=wal")
        self.conn.execute(f"pragma synchronous={sync}")
        self.conn.executescript(PLAIN_SCHEMA)
        self.leaf: int | None = None
        self.seq = 0

    def _write(self, msgs: list[dict[str, Any]]) -> None:
        self.seq += 1
        cur = self.conn.execute(
            "insert into turns (session_id, parent_id, seq, created_utc) "
            "values (1, ?, ?, datetime('now'))",
            (self.leaf, self.seq),
        )
        self.leaf = cur.lastrowid
        self.conn.executemany(
            "insert into messages values (?, ?, ?, ?)",
            [(self.leaf, j, m["role"], self.dumps(m)) for j, m in enumerate(msgs)],
        )

    def turn(self, msgs: list[dict[str, Any]]) -> None:
        self.conn.execute("begin immediate")
        self._write(msgs)
        self.conn.execute("commit")

    def batch(self, ts: list[list[dict[str, Any]]]) -> None:
        self.conn.execute("begin immediate")
        for msgs in ts:
            self._write(msgs)
        self.conn.execute("commit")

    def close(self) -> None:
        self.conn.close()


STORES: dict[str, Callable[[Path, str], Any]] = {
    PEERS[0]: NexusTurns,
    PEERS[1]: OpenAITurns,
    PEERS[2]: PlainTurns,
}


def available(name: str) -> str | None:
    """Why a peer cannot run here (None: it can)."""
    if name == PEERS[1]:
        try:
            import agents  # noqa: F401
        except ImportError as err:
            return f"openai-agents not installed ({err})"
    return None


def run_turns(
    n: int, workdir: Path, add: Callable[..., dict[str, Any]], note: Callable[[str], None]
) -> None:
    """Measure every store in every mode; ``add`` records (run.py's ``Results.add``)."""
    import gc
    import shutil

    ts = turns(n)
    payload = payload_bytes(ts)
    print(f"\n== turns: {n} turns (user + assistant, every 5th a 4 KB tool result)", flush=True)
    for name in PEERS:
        why = available(name)
        if why:
            note(f"{name} skipped in the turns table: {why}")
            continue
        for mode in MODES:
            if name == PEERS[1] and mode == "NORMAL":
                continue  # SQLiteSession has no durability setting
            d = workdir / "turns" / name.split()[0] / mode
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            store = STORES[name](d / "t.db", "NORMAL" if mode == "batch" else mode)
            gc.collect()
            c0 = time.process_time()
            if mode == "batch":
                t0 = time.perf_counter()
                store.batch(ts)
                total = time.perf_counter() - t0
                lat = [total / n]
            else:
                lat = []
                for msgs in ts:
                    t0 = time.perf_counter()
                    store.turn(msgs)
                    lat.append(time.perf_counter() - t0)
                total = sum(lat)
            cpu = time.process_time() - c0
            store.close()
            size = disk_bytes(d / "t.db")
            rec = add(
                "turns",
                name,
                n,
                lat,
                mode=mode,
                rate=n / total,
                cpu_rate=n / cpu if cpu else None,
                bytes_=size,
                payload_ratio=size / payload,
            )
            print(
                f"  {name:26s} {mode:6s} {rec['rate']:>9,.0f} turns/s  "
                f"p50 {rec['median_s'] * 1e3:.3f} ms  CPU-bound {rec['cpu_rate'] or 0:>9,.0f}/s  "
                f"disk/text {rec['payload_ratio']:.2f}",
                flush=True,
            )


def turns_table(records: list[dict[str, Any]]) -> list[str]:
    """The issue's table from the ``turns`` records (empty when there are none)."""
    recs = [r for r in records if r["workload"] == "turns"]
    if not recs:
        return []

    def get(peer: str, mode: str) -> dict[str, Any] | None:
        return next((r for r in recs if r["peer"] == peer and r["mode"] == mode), None)

    n = recs[0]["size"]
    title = f"turns: {n:,} turns per store (turns/s; % of the plain sqlite3 turn tree)"
    out = ["", title, "-" * len(title), f"  {'per turn':34s}" + "".join(f"{p:>28s}" for p in PEERS)]
    labels = {
        "FULL": "one commit per turn, WAL FULL",
        "NORMAL": "one commit per turn, WAL NORMAL",
        "batch": "all turns in one transaction",
    }
    for mode in MODES:
        plain = get(PEERS[2], mode)
        cells = []
        for p in PEERS:
            r = get(p, mode)
            if r is None:
                cells.append(f"{'-':>28s}")
                continue
            cell = f"{r['rate']:,.0f}/s"
            if plain and p != PEERS[2]:
                cell += f" ({r['rate'] / plain['rate'] * 100:.0f}%)"
            cells.append(f"{cell:>28s}")
        out.append(f"  {labels[mode]:34s}" + "".join(cells))
    out.append(f"  {'CPU only (turns per CPU second)':34s}")
    for mode in MODES:
        plain = get(PEERS[2], mode)
        cells = []
        for p in PEERS:
            r = get(p, mode)
            if r is None or not r.get("cpu_rate"):
                cells.append(f"{'-':>28s}")
                continue
            cell = f"{r['cpu_rate']:,.0f}/s"
            if plain and plain.get("cpu_rate") and p != PEERS[2]:
                cell += f" ({r['cpu_rate'] / plain['cpu_rate'] * 100:.0f}%)"
            cells.append(f"{cell:>28s}")
        out.append(f"    {labels[mode]:32s}" + "".join(cells))
    cells = []
    for p in PEERS:
        r = get(p, "batch")
        cells.append(f"{'-':>28s}" if r is None else f"{r['payload_ratio']:>28.2f}")
    out.append(f"  {'bytes on disk / text payload':34s}" + "".join(cells))
    return out
