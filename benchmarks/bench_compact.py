"""Compaction at scale: plan + extractive summary + write, on a long session.

Builds a session of N turns (user / assistant with a tool call / tool result, like a
coding agent), then times `Store.compact` with the offline extractive summarizer:
the first compaction (the whole history is the window) and a second one after more
turns (the window starts at the first compaction's first kept turn). Prints medians.

    python benchmarks/bench_compact.py --turns 100000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexus_store import Store

WORDS = "read write test fix bug error stack trace parse config module import build deploy".split()


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build(store: Store, turns: int, rng: random.Random) -> str:
    sid = store.create_session(cwd="/bench").id
    done = 0
    while done < turns:
        with store.atomic():
            for _ in range(min(3000, turns - done) // 3 or 1):
                i = done
                store.append_message(
                    sid, {"role": "user", "content": text(rng, 20), "timestamp": i}
                )
                store.append_message(
                    sid,
                    {
                        "role": "assistant",
                        "timestamp": i,
                        "content": [
                            {"type": "text", "text": text(rng, 30)},
                            {
                                "type": "toolCall",
                                "id": f"c{i}",
                                "name": rng.choice(["read", "edit", "bash"]),
                                "arguments": {"path": f"src/m{i % 500}.py"},
                            },
                        ],
                    },
                )
                store.append_message(
                    sid,
                    {
                        "role": "toolResult",
                        "toolCallId": f"c{i}",
                        "toolName": "read",
                        "content": [{"type": "text", "text": text(rng, rng.randint(50, 400))}],
                        "isError": rng.random() < 0.05,
                        "timestamp": i,
                    },
                )
                done += 3
    return sid


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(11)
    folder = Path(tempfile.mkdtemp(prefix="nexus-bench-compact-"))
    rows = []
    for run in range(args.repeat):
        path = folder / f"c{run}.db"
        with Store(path, counter="chars4") as store:
            t0 = time.perf_counter()
            sid = build(store, args.turns, rng)
            built = time.perf_counter() - t0
            before = store.context(sid).tokens
            t0 = time.perf_counter()
            first = store.compact(sid, summarizer="extractive")
            t_first = time.perf_counter() - t0
            after_first = store.context(sid).tokens
            for i in range(300):
                store.append_message(
                    sid, {"role": "user", "content": text(rng, 40), "timestamp": i}
                )
            t0 = time.perf_counter()
            store.compact(sid, summarizer="extractive")
            t_second = time.perf_counter() - t0
            rows.append(
                (built, t_first, t_second, before, after_first, first.plan.messages_compacted)
            )
        for suffix in ("", "-wal", "-shm"):
            f = Path(str(path) + suffix)
            if f.exists():
                os.remove(f)
    med = [statistics.median(r[i] for r in rows) for i in range(3)]
    print(
        f"compaction on a {args.turns:,}-turn session (extractive summarizer, chars/4 counter), "
        f"median of {args.repeat}"
    )
    print(f"  build (batched appends)       {med[0]:8.2f} s")
    print(
        f"  first compact (whole history) {med[1]:8.2f} s   {rows[0][3]:,} -> {rows[0][4]:,} tokens, "
        f"{rows[0][5]:,} messages summarized"
    )
    print(f"  second compact (after 300)    {med[2]:8.2f} s")


if __name__ == "__main__":
    main()
