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

Then the floors (`FloorTurns`): the plain tree doing, on top of its own rows, the work
DESIGN.md requires of every append (the exact token count, the search index,
compression), and then also the smallest lookups the model needs (a turn id unique in
its session, the session's order, the persisted active leaf). No design of nexus_store
can be faster than the required work alone, so a target above that floor cannot be met
on this machine; one above only the floor with lookups needs a design leaner than them.
Last, nexus_store's own schema written by straight-line code with the same required work
(`bench_schema_floor.SchemaFloor`, the same rows the store writes): the distance from the
store to it is what the store's Python costs beyond its schema; and the same plus the
steps any append path keeps (`bench_schema_floor.LeanPath`), the target of a rewrite of
the append path. Every store and floor runs `ROUNDS` times, interleaved, and keeps its
fastest run.

``run_turns`` is called by ``run.py`` (``--only turns``); ``turns_table`` renders the
records as the issue's table.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_schema_floor

MODES = ("FULL", "NORMAL", "batch")
MODE_LABELS = {
    "FULL": "one commit per turn, WAL FULL",
    "NORMAL": "one commit per turn, WAL NORMAL",
    "batch": "all turns in one transaction",
}
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
    id integer primary key,
    turn_id integer not null references turns(id),
    idx integer not null,
    role text not null,
    body text not null
);
create unique index messages_turn_idx on messages (turn_id, idx);
"""
# (A rowid table with an index, not ``without rowid`` on (turn_id, idx): SQLite advises
# ``without rowid`` only for rows smaller than about a twentieth of a page, and bodies
# here run to 4 KB. The eighth session measured the rowid tree 8-27% faster than the
# ``without rowid`` one it replaced, in every mode: the peer is now its faster self.)
INSERT_MESSAGES_SQL = "insert into messages (turn_id, idx, role, body) values (?, ?, ?, ?)"


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
            INSERT_MESSAGES_SQL,
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


class FloorTurns(bench_schema_floor.FloorCommits, PlainTurns):
    """The plain tree plus the work nexus_store must do on every append (a floor, not a peer).

    DESIGN.md requires of each append: the exact token count of every message with the
    default counter (a turn stores its path's cumulative count, and the append returns
    it), the message text searchable as soon as the commit returns, and large content
    compressed (bytes on disk <= 1.0x the JSONL). This store does exactly that on top of
    `PlainTurns` and nothing else: ``tokens.message_tokens`` with the store's cl100k
    counter, a contentless FTS5 index (the store's tokenizer) fed in bulk every 256
    messages and at the end of a batch (the store's search indexes the rest before it
    answers), and ``compressed.compress`` of bodies of at least
    ``compressed.THRESHOLD`` bytes. Whatever a real store adds (columns, indexes, path
    values, validation) comes on top, so its rate bounds what any design of nexus_store
    can reach here.

    With ``"lookups"`` in ``work`` it also keeps what the store's reads and checks need
    beyond the plain tree's parent index, at their smallest: a turn id unique within its
    session (8 random hex digits, indexed), an index on (session, seq), and the session
    row (active leaf, last seq, time; the leaf indexed for foreign-key checks) written
    once per commit, as the store writes it.
    """

    def __init__(self, path: Path, sync: str, work: frozenset[str]) -> None:
        from nexus_store.store import compressed
        from nexus_store.tokens import get_counter, message_tokens

        super().__init__(path, sync)
        self.work = work
        self.counter = get_counter("cl100k_base")
        self.counter.count(["warm up"])  # the encoding loads once per process
        self.tokens = message_tokens
        self.compress = compressed.compress
        self.threshold = compressed.THRESHOLD
        self.pending: list[tuple[int, str]] = []
        self.rowid = 0
        if "search" in work:
            self.conn.execute(
                "create virtual table fts using fts5(text, content='', "
                "tokenize='unicode61 remove_diacritics 2')"
            )
        if "lookups" in work:
            self.conn.executescript(LOOKUPS_SCHEMA)

    def _write(self, msgs: list[dict[str, Any]]) -> None:
        self.seq += 1
        if "lookups" in self.work:
            sql = (
                "insert into turns (session_id, parent_id, seq, created_utc, uid) "
                "values (1, ?, ?, datetime('now'), ?)"
            )
            params: tuple[Any, ...] = (self.leaf, self.seq, secrets.token_hex(4))
        else:
            sql = (
                "insert into turns (session_id, parent_id, seq, created_utc) "
                "values (1, ?, ?, datetime('now'))"
            )
            params = (self.leaf, self.seq)
        self.leaf = self.conn.execute(sql, params).lastrowid
        rows: list[tuple[Any, ...]] = []
        for j, m in enumerate(msgs):
            if "count" in self.work:
                self.tokens(self.counter, m)
            body = self.dumps(m)
            if "compress" in self.work and len(body) >= self.threshold:
                rows.append((self.leaf, j, m["role"], self.compress(body)))
            else:
                rows.append((self.leaf, j, m["role"], body))
            if "search" in self.work:
                self.rowid += 1
                self.pending.append((self.rowid, message_text(m)))
        self.conn.executemany(INSERT_MESSAGES_SQL, rows)
        if len(self.pending) >= 256:
            self._index()

    def _index(self) -> None:
        if not self.pending:
            return
        self.conn.executemany("insert into fts (rowid, text) values (?, ?)", self.pending)
        self.pending.clear()

    def _session_row(self) -> None:
        # once per commit, as the store writes it (not once per turn of a batch)
        if "lookups" in self.work:
            self.conn.execute(
                "update sessions set leaf = ?, last_seq = ?, updated = datetime('now') "
                "where id = 1",
                (self.leaf, self.seq),
            )


LOOKUPS_SCHEMA = """
alter table turns add column uid text;
create unique index turns_uid on turns (session_id, uid);
create unique index turns_seq on turns (session_id, seq);
create table sessions (
    id integer primary key, leaf integer references turns (id), last_seq integer, updated text
);
create index sessions_leaf on sessions (leaf);
insert into sessions values (1, null, 0, null);
"""

#: Every store and floor runs this many times, interleaved; each keeps its fastest run.
ROUNDS = 3
#: The floors measured after the peers: the plain tree plus one kind of required work, then all.
FLOORS = {
    "+ exact count": frozenset({"count"}),
    "+ search index": frozenset({"search"}),
    "+ compression": frozenset({"compress"}),
    "+ all three (floor)": frozenset({"count", "search", "compress"}),
    "+ all three + lookups": frozenset({"count", "search", "compress", "lookups"}),
}


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


def measure(
    store: Any, ts: list[list[dict[str, Any]]], mode: str
) -> tuple[list[float], float, float]:
    """Write ``ts`` to ``store`` in ``mode``: (per-turn latencies, wall seconds, CPU seconds)."""
    import gc

    gc.collect()
    c0 = time.process_time()
    if mode == "batch":
        t0 = time.perf_counter()
        store.batch(ts)
        total = time.perf_counter() - t0
        lat = [total / len(ts)]
    else:
        lat = []
        for msgs in ts:
            t0 = time.perf_counter()
            store.turn(msgs)
            lat.append(time.perf_counter() - t0)
        total = sum(lat)
    return lat, total, time.process_time() - c0


def run_turns(
    n: int, workdir: Path, add: Callable[..., dict[str, Any]], note: Callable[[str], None]
) -> None:
    """Measure every store and floor in every mode; ``add`` records (``Results.add``).

    The stores run in `ROUNDS` interleaved rounds (each round runs every store once per
    mode, one after another) and each keeps its fastest round: on a shared machine the
    speed drifts within a run, and a store measured only before or after a drift would
    carry it into its ratio.
    """
    import shutil

    ts = turns(n)
    payload = payload_bytes(ts)
    print(
        f"\n== turns: {n} turns (user + assistant, every 5th a 4 KB tool result), "
        f"best of {ROUNDS} interleaved rounds",
        flush=True,
    )
    runs: list[tuple[str, str, str, Callable[[Path, str], Any]]] = []
    for name in PEERS:
        why = available(name)
        if why:
            note(f"{name} skipped in the turns table: {why}")
            continue
        for mode in MODES:
            if name != PEERS[1] or mode != "NORMAL":  # SQLiteSession has no such setting
                runs.append(("turns", name, mode, STORES[name]))
    for mode in MODES:
        for label, work in FLOORS.items():
            runs.append(
                (
                    "turns-floor",
                    f"plain tree {label}",
                    mode,
                    lambda path, sync, work=work: FloorTurns(path, sync, work),
                )
            )
        runs.append(("turns-floor", bench_schema_floor.NAME, mode, bench_schema_floor.SchemaFloor))
        runs.append(("turns-floor", bench_schema_floor.LEAN, mode, bench_schema_floor.LeanPath))
    best: dict[tuple[str, str], tuple[float, float, list[float], int]] = {}
    for _ in range(ROUNDS):
        for mode in MODES:
            for _workload, label, run_mode, factory in runs:
                if run_mode != mode:
                    continue
                d = workdir / "turns" / label.replace(" ", "-") / mode
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                store = factory(d / "t.db", "NORMAL" if mode == "batch" else mode)
                lat, total, cpu = measure(store, ts, mode)
                store.close()
                kept = best.get((label, mode))
                if kept is None or total < kept[0]:
                    best[(label, mode)] = (total, cpu, lat, disk_bytes(d / "t.db"))
    for workload, label, mode, _factory in runs:
        total, cpu, lat, size = best[(label, mode)]
        extra: dict[str, Any] = {}
        if workload == "turns":
            extra = {"bytes_": size, "payload_ratio": size / payload}
        rec = add(
            workload,
            label,
            n,
            lat,
            mode=mode,
            rate=n / total,
            cpu_rate=n / cpu if cpu else None,
            **extra,
        )
        disk = f"  disk/text {rec['payload_ratio']:.2f}" if "payload_ratio" in rec else ""
        print(
            f"  {label:42s} {mode:6s} {rec['rate']:>9,.0f} turns/s  "
            f"p50 {rec['median_s'] * 1e3:.3f} ms  CPU-bound {rec['cpu_rate'] or 0:>9,.0f}/s{disk}",
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
    title = (
        f"turns: {n:,} turns per store, best of {ROUNDS} interleaved rounds "
        "(turns/s; % of the plain sqlite3 turn tree)"
    )
    out = ["", title, "-" * len(title), f"  {'per turn':34s}" + "".join(f"{p:>28s}" for p in PEERS)]
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
        out.append(f"  {MODE_LABELS[mode]:34s}" + "".join(cells))
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
        out.append(f"    {MODE_LABELS[mode]:32s}" + "".join(cells))
    cells = []
    for p in PEERS:
        r = get(p, "batch")
        cells.append(f"{'-':>28s}" if r is None else f"{r['payload_ratio']:>28.2f}")
    out.append(f"  {'bytes on disk / text payload':34s}" + "".join(cells))
    out.extend(floors_table(records, get))
    return out


def floors_table(
    records: list[dict[str, Any]], get: Callable[[str, str], dict[str, Any] | None]
) -> list[str]:
    """The floors' rows: each as wall (CPU) % of the plain tree, and nexus_store's % of each."""
    floors = [r for r in records if r["workload"] == "turns-floor"]
    if not floors:
        return []
    out = [
        "",
        "  floors: the plain tree plus the work every append must do (FloorTurns), and",
        "  nexus_store's own schema written by straight-line code, alone and with the",
        "  steps any append path keeps (bench_schema_floor),",
        "  % of the plain tree above, wall (CPU)",
        f"  {'':34s}" + "".join(f"{m:>22s}" for m in MODES),
    ]

    def pct(a: dict[str, Any], b: dict[str, Any]) -> str:
        wall = f"{a['rate'] / b['rate'] * 100:.0f}%"
        if a.get("cpu_rate") and b.get("cpu_rate"):
            wall += f" ({a['cpu_rate'] / b['cpu_rate'] * 100:.0f}%)"
        return wall

    def by_peer(peer: str, mode: str) -> dict[str, Any] | None:
        return next((x for x in floors if x["peer"] == peer and x["mode"] == mode), None)

    def row(label: str, cell: Callable[[str], str]) -> None:
        out.append(f"  {label:34s}" + "".join(f"{cell(mode):>22s}" for mode in MODES))

    def share(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
        return "-" if a is None or b is None else pct(a, b)

    ours = [n for n in (bench_schema_floor.NAME, bench_schema_floor.LEAN) if by_peer(n, MODES[0])]
    for peer in [f"plain tree {label}" for label in FLOORS] + ours:
        row(peer, lambda mode, peer=peer: share(by_peer(peer, mode), get(PEERS[2], mode)))
    bases = {
        "lookups": "plain tree + all three + lookups",
        "schema": bench_schema_floor.NAME,
        "lean": bench_schema_floor.LEAN,
    }
    for label, peer in bases.items():
        if label == "lookups" or peer in ours:
            row(
                f"nexus_store, % of the {label} floor",
                lambda mode, peer=peer: share(get(PEERS[0], mode), by_peer(peer, mode)),
            )
    return out


def targets(records: list[dict[str, Any]]) -> list[tuple[str, str, bool | None, str | None]]:
    """Issue 17's write targets from this run: (name, value, met, a note on the floor).

    The note says how fast the floors (`FLOORS`) ran in the same run against the
    target's bar (the plain tree's rate times 50%, or `SQLiteSession`'s rate): a target
    above the required work alone cannot be met here by any design; one between it and
    the floor with the model's lookups only by a design leaner than those lookups. The
    note adds how fast nexus_store's own schema ran written straight, and with the steps
    any append path keeps (`bench_schema_floor`): what this schema allows an append path
    with no cost of its own, and what a rewrite of the append path could aim at.
    """
    recs = [r for r in records if r["workload"] in ("turns", "turns-floor")]

    def get(workload: str, peer: str, mode: str) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in recs
                if r["workload"] == workload and r["peer"] == peer and r["mode"] == mode
            ),
            None,
        )

    def verdict(mode: str, bar: float, unit: float, of: str = "") -> str | None:
        """The floors of ``mode`` against ``bar`` (turns/s), as shares of ``unit`` (turns/s)."""
        work = get("turns-floor", "plain tree + all three (floor)", mode)
        lookups = get("turns-floor", "plain tree + all three + lookups", mode)
        if not (work and lookups):
            return None
        w, k = work["rate"] / unit, lookups["rate"] / unit
        own = get("turns-floor", bench_schema_floor.NAME, mode)
        lean = get("turns-floor", bench_schema_floor.LEAN, mode)
        schema = (
            ""
            if own is None
            else f"; nexus_store's schema written straight: {own['rate'] / unit:.0%}"
        )
        if own is not None and lean is not None:
            schema += f", with a lean append path: {lean['rate'] / unit:.0%}"
        if work["rate"] < bar:
            return f"not reachable here: the required work alone runs at {w:.0%}{of} (floor)"
        if lookups["rate"] < bar:
            return (
                f"at the edge: the required work runs at {w:.0%}{of}, "
                f"with the model's lookups at {k:.0%} (floors){schema}"
            )
        return f"reachable: the floor with the model's lookups runs at {k:.0%}{of}{schema}"

    out: list[tuple[str, str, bool | None, str | None]] = []
    nx = get("turns", PEERS[0], "FULL")
    sq = get("turns", PEERS[1], "FULL")
    name = "one commit per turn, WAL FULL >= SQLiteSession"
    if nx and sq:
        r = nx["rate"] / sq["rate"]
        value = f"{r:.0%} ({nx['rate']:,.0f} vs {sq['rate']:,.0f}/s)"
        out.append(
            (name, value, r >= 1, verdict("FULL", sq["rate"], sq["rate"], " of SQLiteSession"))
        )
    else:
        out.append((name, "not measured", None, None))
    for mode in MODES:
        name = f"{MODE_LABELS[mode]} >= 50% of the plain tree"
        a, plain = get("turns", PEERS[0], mode), get("turns", PEERS[2], mode)
        if not (a and plain):
            out.append((name, "not measured", None, None))
            continue
        r = a["rate"] / plain["rate"]
        value = f"{r:.0%} ({a['rate']:,.0f} vs {plain['rate']:,.0f}/s)"
        out.append((name, value, r >= 0.5, verdict(mode, plain["rate"] * 0.5, plain["rate"])))
    return out
