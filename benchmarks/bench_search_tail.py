"""How the search tail's threshold trades commit cost against search latency (issue 17).

Messages are indexed for search in bulk (nexus_store/store/indexqueue.py): the tail of
unindexed messages is indexed when it reaches ``TAIL_MESSAGES`` messages at a commit, and
before every search. For each threshold this prints, on ``bench_turns.py``'s turns (user
+ assistant, every 5th turn a 4 KB tool result; one commit per turn at WAL NORMAL):

- the CPU time per turn of the appends (their drains included);
- the wall and CPU time of one ``Store.search`` for a word no message holds (so the
  figure is the search's fixed cost) with a tail just under the threshold (it indexes
  the tail first, in a short transaction of its own) and with no tail.

Threshold 1 indexes at every commit, as the per-row trigger did (one segment per commit).

    python benchmarks/bench_search_tail.py            # 2,000 turns
    python benchmarks/bench_search_tail.py --turns 500 --thresholds 1,256
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_turns

from nexus_store import Store
from nexus_store.store import indexqueue


def measure(threshold: int, n: int, folder: Path) -> dict[str, float]:
    """Appends' CPU per turn, then search latencies, at one threshold."""
    indexqueue.TAIL_MESSAGES = threshold
    ts = bench_turns.turns(n)
    path = folder / f"t{threshold}.db"
    store = Store(str(path), synchronous="NORMAL")
    sid = store.create_session().id
    store.append_message(sid, {"role": "user", "content": "warm up", "timestamp": 0})
    c0 = time.process_time()
    for msgs in ts:
        store.append_messages(sid, msgs)
    cpu_turn = (time.process_time() - c0) / n
    store.search("warm")  # no tail from here
    # a tail just under the threshold (the appends' drains leave it there at most)
    tails: list[tuple[float, float]] = []
    empty: list[tuple[float, float]] = []
    more = bench_turns.turns(threshold * 2 + 10, seed=5)
    flat = [m for msgs in more for m in msgs]
    for rep in range(3):
        top, mark = indexqueue.tail_state(store.handle) or (0, 0)
        assert top == mark
        chunk = flat[rep * threshold : rep * threshold + max(threshold - 1, 0)]
        for message in chunk:
            store.append_message(sid, message)
        w0, c0 = time.perf_counter(), time.process_time()
        store.search("walrus", limit=20)
        tails.append((time.perf_counter() - w0, time.process_time() - c0))
        w0, c0 = time.perf_counter(), time.process_time()
        store.search("walrus", limit=20)
        empty.append((time.perf_counter() - w0, time.process_time() - c0))
    store.close()
    return {
        "threshold": threshold,
        "cpu_us_per_turn": cpu_turn * 1e6,
        "search_tail_ms": statistics.median(w for w, _ in tails) * 1e3,
        "search_tail_cpu_ms": statistics.median(c for _, c in tails) * 1e3,
        "search_ms": statistics.median(w for w, _ in empty) * 1e3,
        "search_cpu_ms": statistics.median(c for _, c in empty) * 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    """Print one row per threshold."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000, help="turns appended per threshold")
    parser.add_argument(
        "--thresholds", default="1,32,128,256,512,1024", help="comma-separated TAIL_MESSAGES"
    )
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="nexus-tail-"))
    try:
        print(
            f"{'threshold':>9} {'CPU us/turn':>11} {'search, tail':>13} {'(CPU)':>8} "
            f"{'search, none':>13} {'(CPU)':>8}"
        )
        for threshold in (int(t) for t in args.thresholds.split(",")):
            r = measure(threshold, args.turns, folder)
            print(
                f"{threshold:>9} {r['cpu_us_per_turn']:>11.0f} {r['search_tail_ms']:>10.2f} ms "
                f"{r['search_tail_cpu_ms']:>5.2f} ms {r['search_ms']:>10.2f} ms "
                f"{r['search_cpu_ms']:>5.2f} ms",
                flush=True,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
