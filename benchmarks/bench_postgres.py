"""Append and context on PostgreSQL beside SQLite (issue 8). Stands alone; prints a table.

    python benchmarks/bench_postgres.py [--sizes 1000,10000] [--url postgresql://...]

Without --url it starts a throwaway PostgreSQL server (tests/pg_server.py: Unix socket
only, fsync on, synchronous_commit on) in a temporary folder. One session grows to
each size, one transaction per appended turn (a user or assistant message of about
200 characters; the chars/4 counter, so that token counting is not measured). At each
size: the append rate so far, and the median time of `Store.context` for the newest
leaf (every turn on the path is read) and for a leaf just after a compaction near
it (a branch: the context starts at the compaction's first kept turn, so its cost
should stay flat as the history grows).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nexus_store import Store  # noqa: E402

TEXT = "Edit src/module.py so that the parser keeps comments; then run the tests. " * 3


def _median_ms(func: Callable[[], object], runs: int = 15) -> float:
    func()  # warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def run(name: str, open_store: Callable[[], Store], sizes: list[int]) -> list[list[str]]:
    rows = []
    with open_store() as store:
        sid = store.create_session(cwd="/bench").id
        done = 0
        spent = 0.0
        for size in sizes:
            started = time.perf_counter()
            for i in range(done, size):
                if i % 2 == 0:
                    store.append_message(sid, {"role": "user", "content": TEXT, "timestamp": i})
                else:
                    store.append_message(
                        sid,
                        {
                            "role": "assistant",
                            "content": [{"type": "text", "text": TEXT}],
                            "provider": "p",
                            "model": "m",
                            "timestamp": i,
                        },
                    )
            spent += time.perf_counter() - started
            rate = (size - done) / (time.perf_counter() - started)
            done = size
            leaf = store.get_session(sid).active_leaf
            assert leaf is not None
            if hasattr(store, "analyze"):
                store.analyze()  # steady state: autovacuum keeps statistics current
            full_ms = _median_ms(lambda leaf=leaf: store.context(sid, leaf))
            # a compaction near the leaf, on a branch, keeping the last 10 turns
            kept = store.path(sid, leaf)[-10].id
            compaction = store.append_compaction(sid, "summary " * 50, kept, 10_000, parent_id=leaf)
            tail = compaction.id
            for j in range(4):
                tail = store.append_message(
                    sid, {"role": "user", "content": TEXT, "timestamp": j}, parent_id=tail
                ).id
            compact_ms = _median_ms(lambda tail=tail: store.context(sid, tail))
            messages = len(store.context(sid, leaf).messages)
            store.navigate(sid, leaf)
            done += 5  # the branch's turns count in the session's size
            rows.append(
                [
                    name,
                    f"{size:,}",
                    f"{rate:,.0f}",
                    f"{full_ms:.2f}",
                    str(messages),
                    f"{compact_ms:.2f}",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument(
        "--url", help="an existing PostgreSQL database (default: a throwaway server)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    server = None
    url = args.url
    if url is None:
        from tests.pg_server import start_server

        server = start_server()
        url = server.create_schema("bench")
    rows: list[list[str]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode in ("NORMAL", "FULL"):
                path = Path(tmp) / f"bench-{mode}.db"
                rows += run(
                    f"sqlite WAL {mode}",
                    lambda p=path, m=mode: Store(p, counter="chars4", synchronous=m),
                    sizes,
                )
            for mode, label in (("NORMAL", "on"), ("OFF", "off")):
                schema_url = url if server is None else server.create_schema("bench")
                rows += run(
                    f"postgres commit={label}",
                    lambda u=schema_url, m=mode: Store(u, counter="chars4", synchronous=m),
                    sizes,
                )
    finally:
        if server is not None:
            server.stop()
    header = ["backend", "turns", "append/s", "context ms", "messages", "compacted ctx ms"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(
        f"# {platform.node()} {platform.machine()} python {platform.python_version()} "
        f"{time.strftime('%Y-%m-%d')}; one transaction per turn; medians of 15 context calls"
    )
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


if __name__ == "__main__":
    main()
