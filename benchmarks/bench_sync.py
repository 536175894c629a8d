"""Sync of a tree of transcripts: first full sync, nothing changed, one file grown by 1 MB.

Generates FILES transcripts of equal size (TOTAL_MB together) under a folder: pi v3
files, plus one file of each format whose entries have no ids of their own (a Codex
rollout, a compaction-event NDJSON file, a pi v1 file). Then times, in one process and
one database:

* ``first``: the first `sync_paths` over the tree (everything is new);
* ``nochange``: a sync with nothing changed (median of 5; one stat per file is the target);
* ``grown`` (per format): a sync after appending ~1 MB of entries to one file (median of
  3 rounds, wall and CPU time); the bytes sync read are checked to be exactly the
  appended ones (twice them for NDJSON, whose boundaries are pre-scanned); the NDJSON
  growth holds a compaction whose boundary is a message stored before the checkpoint;

and, as the peers a user has without checkpoints, in the same run: ``import`` of the whole
tree again (idempotent: what a cron job would do without sync) and ``import`` of each
grown file whole. Prints one JSON object.

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


def _text(n: int) -> str:
    return " ".join(WORDS[(n * 7 + k) % len(WORDS)] for k in range(150))


def codex_lines(start: int, count: int) -> list[str]:
    lines = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        block = {"type": "input_text" if role == "user" else "output_text", "text": _text(n)}
        payload = {"type": "message", "role": role, "content": [block]}
        stamp = "2026-01-01T00:00:00.000Z"
        lines.append(json.dumps({"timestamp": stamp, "type": "response_item", "payload": payload}))
    return lines


def ndjson_lines(start: int, count: int, boundary: str | None = None) -> list[str]:
    lines = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        message = {"id": f"m{n}", "type": "message", "role": role, "content": _text(n)}
        lines.append(json.dumps({**message, "timestamp": 1_767_225_600 + n}))
    if boundary is not None:  # a compaction keeping from a message before the checkpoint
        compaction = {"id": f"c{start}", "type": "compaction", "summary": "so far"}
        compaction.update(boundaryMessageId=boundary, tokensBeforeCompaction=1000)
        lines.append(json.dumps({**compaction, "trigger": "auto", "timestamp": 1_767_225_600}))
    return lines


def pi_v1_lines(start: int, count: int) -> list[str]:
    lines = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        message: dict = {"role": role, "content": _text(n), "timestamp": n}
        entry = {"type": "message", "timestamp": "2026-01-01T00:00:00.000Z", "message": message}
        lines.append(json.dumps(entry))
    return lines


#: format -> (file name, header line or None, lines(start, count) after the header)
FORMATS = {
    "pi": ("s00000.jsonl", None, None),
    "codex": (
        "rollout-s00001.jsonl",
        {"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta", "payload": {"id": "c1"}},
        codex_lines,
    ),
    "ndjson": ("s00002.ndjson", None, ndjson_lines),
    "pi_v1": ("s00003.jsonl", {"type": "session", "id": "v1", "cwd": "/b"}, pi_v1_lines),
}


def grow_lines(fmt: str, start: int, count: int) -> list[str]:
    if fmt == "pi":
        return entries("s00000", start, count, f"s00000-{start - 1}")
    if fmt == "ndjson":
        return ndjson_lines(start, count, boundary=f"m{start // 2}")
    return FORMATS[fmt][2](start, count)  # type: ignore[misc]


def build(tree: Path, files: int, total_mb: float) -> tuple[int, int]:
    per_entry = len(entries("x", 0, 1, None)[0]) + 1
    per_file = max(1, int(total_mb * 1e6 / files / per_entry))
    tree.mkdir(parents=True, exist_ok=True)
    others = {name for name, _, _ in list(FORMATS.values())[1:]}
    for f in range(files):
        session = f"s{f:05d}"
        header = json.dumps({"type": "session", "version": 3, "id": session, "cwd": "/b"})
        if f"{session}.jsonl" in others or f"{session}.ndjson" in others:
            continue
        if f"rollout-{session}.jsonl" in others:
            continue
        with open(tree / f"{session}.jsonl", "w") as out:
            out.write("\n".join([header, *entries(session, 0, per_file, None)]) + "\n")
    for name, head, make in list(FORMATS.values())[1:]:
        lines = ([json.dumps(head)] if head is not None else []) + make(0, per_file)
        (tree / name).write_text("\n".join(lines) + "\n")
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
        for fmt, (name, _, _) in FORMATS.items():
            target = tree / name
            last = per_file
            grown, cpu, read = [], [], []
            for _ in range(3):
                lines = grow_lines(fmt, last, grow_n)
                data = ("\n".join(lines) + "\n").encode()
                with open(target, "ab") as f:
                    f.write(data)
                last += grow_n
                t, c = time.perf_counter(), time.process_time()
                report = sync_paths(store, [tree])
                grown.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                assert report.grown == 1 and report.turns == len(lines), report
                assert report.problems == [], report.problems[:3]
                passes = 2 if fmt == "ndjson" else 1  # NDJSON: the boundary pre-scan
                assert report.bytes == passes * len(data), (fmt, report.bytes, len(data))
                read.append(report.bytes)
            key = "" if fmt == "pi" else f"_{fmt}"
            out[f"grown{key}_s"] = statistics.median(grown)
            out[f"grown{key}_cpu_s"] = statistics.median(cpu)
            out[f"grown{key}_bytes"] = statistics.median(read)
            t, c = time.perf_counter(), time.process_time()
            store.import_paths([target])
            out[f"import_grown{key}_file_s"] = time.perf_counter() - t
            out[f"import_grown{key}_file_cpu_s"] = time.process_time() - c
            out[f"grown{key}_file_bytes"] = target.stat().st_size
        t = time.perf_counter()
        store.import_paths([tree])
        out["import_tree_again_s"] = time.perf_counter() - t
    print(json.dumps(out))


if __name__ == "__main__":
    main()
