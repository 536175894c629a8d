"""Sync of a tree of transcripts: first full sync, nothing changed, one file grown by 1 MB.

Generates FILES pi v3 transcripts of equal size (TOTAL_MB together) under a folder, then
times, in one process and one database:

* ``first``: the first `sync_paths` over the tree (everything is new);
* ``nochange``: a sync with nothing changed (median of 5; one stat per file is the target);
* ``grown``: a sync after appending ~1 MB of entries to one file (median of 3 rounds); the
  bytes sync read are checked to be exactly the appended ones;

and, as the peers a user has without checkpoints, in the same run: ``import`` of the whole
tree again (idempotent: what a cron job would do without sync) and ``import`` of the grown
file whole. Prints one JSON object.

    python benchmarks/bench_sync.py --files 1000 --total-mb 1000 --db /tmp/s.db --tree /tmp/t
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexus_store import Store
from nexus_store.sync import sync_paths

WORDS = "read write test fix bug error stack trace parse config module import build deploy".split()


def entries(session: str, start: int, count: int, parent: str | None) -> list[str]:
    lines = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        text = " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(150))
        message: dict = {"role": role, "content": text, "timestamp": n}
        if role == "assistant":
            message = {**message, "content": [{"type": "text", "text": text}], "model": "m"}
        uid = f"{session}-{n}"
        lines.append(
            json.dumps(
                {
                    "type": "message",
                    "id": uid,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": message,
                }
            )
        )
        parent = uid
    return lines


def build(tree: Path, files: int, total_mb: float) -> tuple[int, int]:
    per_entry = len(entries("x", 0, 1, None)[0]) + 1
    per_file = max(1, int(total_mb * 1e6 / files / per_entry))
    tree.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        session = f"s{f:05d}"
        header = json.dumps({"type": "session", "version": 3, "id": session, "cwd": "/b"})
        with open(tree / f"{session}.jsonl", "w") as out:
            out.write("\n".join([header, *entries(session, 0, per_file, None)]) + "\n")
    return per_file, per_entry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--total-mb", type=float, default=1000)
    ap.add_argument("--grow-mb", type=float, default=1.0)
    ap.add_argument("--db", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--counter", default="chars4")
    args = ap.parse_args()
    tree = Path(args.tree)
    shutil.rmtree(tree, ignore_errors=True)
    per_file, per_entry = build(tree, args.files, args.total_mb)
    size = sum(p.stat().st_size for p in tree.iterdir())
    out: dict = {"files": args.files, "bytes": size, "counter": args.counter}
    with Store(args.db, counter=args.counter) as store:
        t = time.perf_counter()
        first = sync_paths(store, [tree])
        out["first_s"] = time.perf_counter() - t
        assert first.new == args.files and not first.errors, first.errors
        times = []
        for _ in range(5):
            t = time.perf_counter()
            again = sync_paths(store, [tree])
            times.append(time.perf_counter() - t)
            assert again.unchanged == args.files and again.turns == 0
        out["nochange_s"] = statistics.median(times)
        grow_n = max(1, int(args.grow_mb * 1e6 / per_entry))
        target = tree / "s00000.jsonl"
        last = per_file
        grown, read = [], []
        for _ in range(3):
            lines = entries("s00000", last, grow_n, f"s00000-{last - 1}")
            data = ("\n".join(lines) + "\n").encode()
            with open(target, "ab") as f:
                f.write(data)
            last += grow_n
            t = time.perf_counter()
            report = sync_paths(store, [tree])
            grown.append(time.perf_counter() - t)
            assert report.grown == 1 and report.turns == grow_n, report
            assert report.bytes == len(data), (report.bytes, len(data))
            read.append(report.bytes)
        out["grown_s"] = statistics.median(grown)
        out["grown_bytes"] = statistics.median(read)
        t = time.perf_counter()
        store.import_paths([target])
        out["import_grown_file_s"] = time.perf_counter() - t
        out["grown_file_bytes"] = target.stat().st_size
        t = time.perf_counter()
        store.import_paths([tree])
        out["import_tree_again_s"] = time.perf_counter() - t
    print(json.dumps(out))


if __name__ == "__main__":
    main()
