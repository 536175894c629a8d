"""NexusSession beside the OpenAI Agents SDK's SQLiteSession (issue 17's session targets).

For each history size N (items: a user message, an assistant message, every 5th turn a
function call and a 1 KB output), in one run, on one database file per peer:

- ``add N``: one ``add_items`` call of N items (one transaction), items per second;
- ``get limit=10``: ``get_items(limit=10)`` on the N-item history, median of 50;
- ``pop+add``: ``pop_item`` then ``add_items`` of the popped item, median of 50.

Target: ``get limit=10`` and ``pop`` cost O(N) in the limit, not in the history (under
1 ms at 20,000 items). Ratios are against SQLiteSession. Usage::

    python benchmarks/bench_sdk_session.py            # 5,000 and 20,000 items
    python benchmarks/bench_sdk_session.py --quick    # 1,000 items
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

        found["SQLiteSession"] = lambda: SQLiteSession("bench", folder / "sdk.db")
    except ImportError:
        print("note: openai-agents is not installed; SQLiteSession is left out")
    found["NexusSession"] = lambda: NexusSession("bench", folder / "nexus.db")
    found["NexusAdvancedSession"] = lambda: NexusAdvancedSession("bench", folder / "adv.db")
    return found


async def measure(make: Any, items: list[dict[str, Any]], reps: int) -> dict[str, float]:
    """Times of one peer on one history."""
    session = make()
    try:
        start = time.perf_counter()
        await session.add_items(items)
        add = time.perf_counter() - start
        gets, pops = [], []
        for _ in range(reps):
            start = time.perf_counter()
            got = await session.get_items(limit=10)
            gets.append(time.perf_counter() - start)
            assert got == items[-10:]
        for _ in range(reps):
            start = time.perf_counter()
            item = await session.pop_item()
            pops.append(time.perf_counter() - start)
            assert item == items[-1]
            await session.add_items([item])
        return {
            "add": len(items) / add,
            "get": statistics.median(gets) * 1000,
            "pop": statistics.median(pops) * 1000,
        }
    finally:
        session.close()


def main() -> None:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 items only")
    args = parser.parse_args()
    sizes = [1_000] if args.quick else [5_000, 20_000]
    reps = 10 if args.quick else 50
    print(
        f"# SDK sessions, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}"
    )
    print(
        f"{'items':>7} {'peer':<22} {'add items/s':>12} {'get limit=10 ms':>16} "
        f"{'pop ms':>8} {'get ratio':>10} {'pop ratio':>10}"
    )
    for size in sizes:
        items = history(size)
        with tempfile.TemporaryDirectory() as tmp:
            results = {
                name: asyncio.run(measure(make, items, reps))
                for name, make in peers(Path(tmp)).items()
            }
        base = results.get("SQLiteSession")
        for name, r in results.items():
            get_ratio = f"{r['get'] / base['get']:.2f}x" if base else "-"
            pop_ratio = f"{r['pop'] / base['pop']:.2f}x" if base else "-"
            print(
                f"{size:>7} {name:<22} {r['add']:>12,.0f} {r['get']:>16.3f} "
                f"{r['pop']:>8.3f} {get_ratio:>10} {pop_ratio:>10}"
            )


if __name__ == "__main__":
    main()
