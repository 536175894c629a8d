"""The nexus sessions beside the OpenAI Agents SDK's SQLite sessions (issues 16 and 17).

For each history size N (items: a user message, an assistant message, every 5th turn a
function call and a 1 KB output), in one run, each peer on its own database file:

- ``add N``: one ``add_items`` call of N items (one transaction), items per second;
- ``get limit=10``: ``get_items(limit=10)`` on the N-item history, median of 50;
- ``pop``: ``pop_item`` (then ``add_items`` of the popped item, not timed), median of 50.

Each median is given in wall milliseconds and in CPU milliseconds (process time, every
thread: the sessions work in ``asyncio.to_thread``). The machine is shared, so compare
CPU. Ratios are CPU against the SDK's class the nexus one replaces: `NexusSession` against
``SQLiteSession``, `NexusAdvancedSession` against ``AdvancedSQLiteSession``. Target
(issue 16): ``get limit=10`` and ``pop`` cost O(N) in the limit, not in the history, and
stay under 1 ms at 20,000 items. Usage::

    python benchmarks/bench_sdk_session.py                  # 5,000 and 20,000 items
    python benchmarks/bench_sdk_session.py --sizes 1000,100000
    python benchmarks/bench_sdk_session.py --quick          # 1,000 items
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexus_store.openai_agents import NexusAdvancedSession, NexusSession


def history(n: int) -> list[dict[str, Any]]:
    """N items of a deterministic conversation."""
    items: list[dict[str, Any]] = []
    turn = 0
    while len(items) < n:
        items.append({"role": "user", "content": f"question {turn}: " + "why " * 20})
        if turn % 5 == 4:
            call = f"call_{turn}"
            items.append(
                {
                    "type": "function_call",
                    "call_id": call,
                    "name": "read_file",
                    "arguments": '{"path": "a.py"}',
                }
            )
            items.append({"type": "function_call_output", "call_id": call, "output": "x" * 1024})
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "because " * 30, "annotations": []}],
            }
        )
        turn += 1
    return items[:n]


def peers(folder: Path) -> dict[str, Any]:
    """Constructors of the sessions compared, each on its own file."""
    found: dict[str, Any] = {}
    try:
        from agents import SQLiteSession
        from agents.extensions.memory import AdvancedSQLiteSession

        found["SQLiteSession"] = lambda: SQLiteSession("bench", folder / "sdk.db")
        found["AdvancedSQLiteSession"] = lambda: AdvancedSQLiteSession(
            session_id="bench", db_path=folder / "sdk-adv.db", create_tables=True
        )
    except ImportError:
        print("note: openai-agents is not installed; the SDK's sessions are left out")
    found["NexusSession"] = lambda: NexusSession("bench", folder / "nexus.db")
    found["NexusAdvancedSession"] = lambda: NexusAdvancedSession("bench", folder / "adv.db")
    return found


BASELINE = {"NexusSession": "SQLiteSession", "NexusAdvancedSession": "AdvancedSQLiteSession"}
"""The SDK class each nexus session replaces (the ratios' denominator)."""


async def timed(work: Any) -> tuple[Any, float, float]:
    """Await ``work``; return its result, wall seconds and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = await work
    return result, time.perf_counter() - wall, time.process_time() - cpu


async def measure(make: Any, items: list[dict[str, Any]], reps: int) -> dict[str, float]:
    """Medians of one peer on one history (milliseconds; ``add`` in items per second)."""
    session = make()
    try:
        _, add, _ = await timed(session.add_items(items))
        gets: list[tuple[float, float]] = []
        pops: list[tuple[float, float]] = []
        for _ in range(reps):
            got, wall, cpu = await timed(session.get_items(limit=10))
            gets.append((wall, cpu))
            assert got == items[-10:]
        for _ in range(reps):
            item, wall, cpu = await timed(session.pop_item())
            pops.append((wall, cpu))
            assert item == items[-1]
            await session.add_items([item])
        return {
            "add": len(items) / add,
            "get": statistics.median(w for w, _ in gets) * 1000,
            "get_cpu": statistics.median(c for _, c in gets) * 1000,
            "pop": statistics.median(w for w, _ in pops) * 1000,
            "pop_cpu": statistics.median(c for _, c in pops) * 1000,
        }
    finally:
        session.close()


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 items only")
    parser.add_argument("--sizes", help="comma-separated history sizes (default 5000,20000)")
    args = parser.parse_args()
    if args.sizes:
        sizes = [int(size) for size in args.sizes.split(",")]
    else:
        sizes = [1_000] if args.quick else [5_000, 20_000]
    reps = 10 if args.quick else 50
    print(
        f"# SDK sessions, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}; medians in ms (wall / CPU), ratios on CPU"
    )
    print(
        f"{'items':>7} {'peer':<22} {'add items/s':>12} {'get limit=10':>15} "
        f"{'pop':>15} {'get ratio':>10} {'pop ratio':>10}"
    )
    for size in sizes:
        items = history(size)
        with tempfile.TemporaryDirectory() as tmp:
            results = {
                name: asyncio.run(measure(make, items, reps))
                for name, make in peers(Path(tmp)).items()
            }
        for name, r in results.items():
            base = results.get(BASELINE.get(name, ""))
            get_ratio = f"{r['get_cpu'] / base['get_cpu']:.2f}x" if base else "-"
            pop_ratio = f"{r['pop_cpu'] / base['pop_cpu']:.2f}x" if base else "-"
            get = f"{r['get']:.3f} / {r['get_cpu']:.3f}"
            pop = f"{r['pop']:.3f} / {r['pop_cpu']:.3f}"
            print(
                f"{size:>7} {name:<22} {r['add']:>12,.0f} {get:>15} {pop:>15} "
                f"{get_ratio:>10} {pop_ratio:>10}"
            )


if __name__ == "__main__":
    main()
