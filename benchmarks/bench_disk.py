"""Bytes on disk, import, full-path read and appends of one code tree (issue 17, disk).

Run it once per tree in one session to compare them (CPU times: the machine is shared):

    python benchmarks/bench_disk.py                      # this checkout
    PYTHONPATH=/path/to/other/tree python benchmarks/bench_disk.py

It imports the benchmark history (``workload.history(N, compact_near_leaf=True,
compact_every=10000)``, default N = 100,000) into a fresh store, VACUUMs it and reports
its bytes against the JSONL's; then times the newest leaf's full path read (a 10,000-turn
history without compaction, as run.py's context workload) and one-commit-per-turn
appends at WAL NORMAL (as run.py's turns workload: a user message, an assistant message,
every 5th turn a 4 KB tool result).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workload  # noqa: E402

from nexus_store import Store  # noqa: E402


def cpu() -> float:
    return time.process_time()


def history_file(folder: Path, n: int, compacted: bool) -> Path:
    path = folder / f"history-{n}{'-c' if compacted else ''}.jsonl"
    if not path.exists():
        entries = workload.history(
            n, compact_near_leaf=compacted, compact_every=10_000 if compacted else 0
        )
        workload.write_jsonl(path, entries, session_id=f"bench-{n}")
    return path


def storage(folder: Path, n: int) -> dict[str, float]:
    src = history_file(folder, n, True)
    db = folder / "store.db"
    start = cpu()
    with Store(db, counter="chars4") as store:
        store.import_jsonl(src)
    took = cpu() - start
    conn = sqlite3.connect(db)
    conn.execute("vacuum")
    conn.close()
    size = db.stat().st_size
    db.unlink()
    return {
        "jsonl_mb": src.stat().st_size / 1e6,
        "store_mb": size / 1e6,
        "ratio": size / src.stat().st_size,
        "import_mb_per_cpu_s": src.stat().st_size / 1e6 / took,
    }


def read(folder: Path, n: int, repeat: int) -> dict[str, float]:
    src = history_file(folder, n, False)
    db = folder / "read.db"
    with Store(db, counter="chars4") as store:
        (sid,) = store.import_jsonl(src)
        store.context(sid)  # warm
        times = []
        for _ in range(repeat):
            start = cpu()
            ctx = store.context(sid)
            times.append(cpu() - start)
        count = len(ctx.messages)
    db.unlink()
    return {"context_ms_cpu_p50": statistics.median(times) * 1000, "messages": count}


def appends(folder: Path, turns: int) -> dict[str, float]:
    db = folder / "turns.db"
    big = "x" * 4096
    with Store(db, counter="chars4", synchronous="NORMAL") as store:
        sid = store.create_session().id
        start = cpu()
        for i in range(turns):
            store.append_message(sid, {"role": "user", "content": f"question {i} about the code"})
            store.append_message(
                sid, {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}
            )
            if i % 5 == 4:
                store.append_message(
                    sid,
                    {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "bash",
                     "content": [{"type": "text", "text": big}]},
                )  # fmt: skip
        took = cpu() - start
    db.unlink()
    return {"appends_per_cpu_s": turns / took}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100_000, help="history size for storage")
    parser.add_argument("--data", type=Path, default=HERE / ".work" / "data")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench-disk-"))
    try:
        out = {"tree": str(Path(sys.modules["nexus_store"].__file__ or "").parent)}
        out.update(storage(args.data, args.turns))
        out.update(read(args.data, 10_000, args.repeat))
        out.update(appends(scratch, 2_000))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
