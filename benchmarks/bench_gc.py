"""gc and assemble at scale (issue 18): both must be linear.

* ``gc``: a session with N old dead turns (branches of 100 turns off a live chain,
  plus turns behind a compaction) is cleaned with ``Store.gc`` in batches; the time
  per 1,000 removed turns should stay flat from 10k to 100k (it grew ~4x per doubling
  before migration 0050 and the batched removal).
* ``assemble``: ``ContextEngine.assemble`` with a budget of half the context against
  ``Store.context`` on the same uncompacted leaf (it was quadratic: 120k messages took
  51.6 s against 0.8 s).

run.py calls `run_gc` and `run_assemble` (workloads ``gc`` and ``assemble``); alone::

    python benchmarks/bench_gc.py --gc 10000,100000 --assemble 30000,120000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexus_store import Store
from nexus_store.engine import ContextEngine

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = "2020-01-01T00:00:00.000Z"
NEW = "2026-05-30T00:00:00.000Z"
BRANCH = 100  # turns per dead branch


def _entry(text: str, stamp: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "timestamp": stamp,
        "message": {"role": "user", "content": text, "timestamp": 0},
        **extra,
    }


def build_dead(store: Store, dead: int) -> str:
    """A session with ``dead`` old turns on dead branches and a young live chain."""
    sid = store.create_session(cwd="/bench").id
    with store.atomic():
        chain = [store.append_entry(sid, _entry(f"live {n}", OLD)).id for n in range(50)]
        made = 0
        b = 0
        while made < dead:
            parent = chain[b % len(chain)]
            for d in range(min(BRANCH, dead - made)):
                parent = store.append_entry(sid, _entry(f"dead {b}.{d}", OLD, parentId=parent)).id
                made += 1
            b += 1
        store.navigate(sid, chain[-1])
        store.append_entry(sid, _entry("now", NEW))
    return sid


def time_gc(dead: int, folder: Path) -> tuple[float, int]:
    """Seconds for one gc of ``dead`` dead turns, and the turns it removed."""
    db = folder / f"gc-{dead}.db"
    with Store(db, counter="chars4") as store:
        build_dead(store, dead)
    with Store(db) as store:
        t0 = time.perf_counter()
        report = store.gc(all_sessions=True, dead_branches_older_than=30, now=NOW, vacuum=False)
        seconds = time.perf_counter() - t0
    db.unlink()
    return seconds, report.dead_branch_turns


def build_exchanges(store: Store, messages: int) -> str:
    """An uncompacted session of user / tool call / tool result exchanges."""
    sid = store.create_session(cwd="/bench").id
    with store.atomic():
        for n in range(messages // 3):
            store.append_message(sid, {"role": "user", "content": f"step {n}", "timestamp": 0})
            store.append_message(
                sid,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "toolCall", "id": f"c{n}", "name": "read", "arguments": {}}
                    ],
                    "timestamp": 0,
                },
            )
            store.append_message(
                sid,
                {
                    "role": "toolResult",
                    "toolCallId": f"c{n}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "output " * 20}],
                    "isError": False,
                    "timestamp": 0,
                },
            )
    return sid


def time_assemble(messages: int, folder: Path, reps: int = 3) -> tuple[list[float], list[float]]:
    """Seconds of ``context()`` and of ``assemble(budget=half)`` on one leaf, ``reps`` each."""
    db = folder / f"assemble-{messages}.db"
    with Store(db, counter="chars4") as store:
        sid = build_exchanges(store, messages)
        engine = ContextEngine(store)
        budget = store.context(sid).tokens // 2
        context_s: list[float] = []
        assemble_s: list[float] = []
        for _ in range(reps):
            t0 = time.perf_counter()
            store.context(sid)
            context_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            engine.assemble(sid, token_budget=budget)
            assemble_s.append(time.perf_counter() - t0)
    db.unlink()
    return context_s, assemble_s


def run_gc(sizes: list[int], res: Any, folder: Path) -> None:
    """Record workload ``gc``: seconds for the whole gc, and per 1,000 turns removed."""
    for size in sizes:
        seconds, removed = time_gc(size, folder)
        per_1k = seconds / removed * 1000 if removed else None
        res.add("gc", "nexus_store", size, [seconds], per=removed, per_1k_s=per_1k)
        print(f"  gc {size:>9,} dead turns: {seconds:8.2f} s, {per_1k:.3f} s per 1k", flush=True)


def run_assemble(sizes: list[int], res: Any, folder: Path) -> None:
    """Record workloads ``assemble`` and ``assemble: context()`` at each size."""
    for size in sizes:
        context_s, assemble_s = time_assemble(size, folder)
        res.add("assemble: context()", "nexus_store", size, context_s)
        res.add("assemble", "nexus_store", size, assemble_s)
        print(
            f"  assemble {size:>9,} messages: context {min(context_s):.2f} s, "
            f"assemble {min(assemble_s):.2f} s",
            flush=True,
        )


class _Print:
    def add(self, *args: Any, **kwargs: Any) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gc", default="10000,100000", help="dead-turn counts")
    ap.add_argument("--assemble", default="30000,120000", help="message counts")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_gc([int(x) for x in args.gc.split(",") if x], _Print(), Path(tmp))
        run_assemble([int(x) for x in args.assemble.split(",") if x], _Print(), Path(tmp))


if __name__ == "__main__":
    main()
