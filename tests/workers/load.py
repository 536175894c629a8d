"""The load scenario: writers and readers as real processes on one database file.

    PYTHONPATH=. python -m tests.workers.load --duration 60 [--db PATH]

Two writers share one session, two more each own a session, and two readers
assemble contexts and run read-only SQL, all at once for ``--duration`` seconds.
Then it checks that no turn was lost or duplicated and that no error (a "database
is locked" above all) reached a caller, and prints turns/s and the slowest operation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from nexus_store import Store

ROOT = Path(__file__).resolve().parents[2]


def run_load(
    db: Path,
    *,
    duration: float,
    shared_writers: int = 2,
    own_writers: int = 2,
    readers: int = 2,
    busy_timeout: float = 5.0,
) -> dict[str, Any]:
    """Run the scenario and return its figures and every problem found."""
    with Store(db, counter="chars4") as store:
        shared = store.create_session(title="shared").id
        own = [store.create_session(title=f"own {i}").id for i in range(own_writers)]
    plan = [("writer", f"s{i}", shared) for i in range(shared_writers)]
    plan += [("writer", f"o{i}", sid) for i, sid in enumerate(own)]
    plan += [
        ("reader", f"r{i}", shared if i % 2 == 0 else (own or [shared])[0]) for i in range(readers)
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEXUS_TEST_BUSY_TIMEOUT": str(busy_timeout)}
    logs = {worker: db.parent / f"{db.name}.{worker}.log" for _, worker, _ in plan}
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.load_worker",
                str(db),
                role,
                worker,
                sid,
                str(duration),
                str(logs[worker]),
            ],
            env=env,
            cwd=ROOT,
        )
        for role, worker, sid in plan
    ]
    codes = [p.wait(timeout=duration + 120) for p in procs]
    elapsed = time.monotonic() - started
    problems: list[str] = [f"worker exited {c}" for c in codes if c != 0]
    written: dict[str, list[dict[str, Any]]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    for (role, worker, sid), _code in zip(plan, codes, strict=True):
        lines = [json.loads(line) for line in logs[worker].read_text().splitlines()]
        summary = next((x["summary"] for x in lines if "summary" in x), None)
        if summary is None:
            problems.append(f"{worker} wrote no summary")
            continue
        summaries[worker] = summary
        problems += [f"{worker}: {e}" for e in summary["errors"]]
        if role == "writer":
            written.setdefault(sid, []).extend(x for x in lines if "id" in x)
    turns = 0
    with Store(db, counter="chars4") as store:
        for sid in [shared, *own]:
            stored = {t.id: t.entry["message"]["content"] for t in store.iter_turns(sid)}
            logged = written.get(sid, [])
            turns += len(stored)
            dup = [i for i, n in Counter(x["id"] for x in logged).items() if n > 1]
            problems += [f"turn {i} logged twice" for i in dup]
            lost = [x["id"] for x in logged if stored.get(x["id"]) != x["text"] * 3]
            problems += [f"turn {i} lost or changed in {sid}" for i in lost[:10]]
            extra = set(stored) - {x["id"] for x in logged}
            problems += [f"turn {i} stored but never logged" for i in list(extra)[:10]]
        integrity = store.conn.execute("pragma integrity_check").fetchone()[0]
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        if not store.doctor().ok:
            problems.append("doctor found problems")
        shared_leaves = len(store.leaves(shared))
    writer_ops = [s for s in summaries.values() if s["role"] == "writer"]
    reader_ops = [s for s in summaries.values() if s["role"] == "reader"]
    slowest = max(summaries.values(), key=lambda s: s["slowest"], default={"slowest": 0.0})
    return {
        "duration": duration,
        "elapsed": round(elapsed, 2),
        "processes": len(plan),
        "turns": turns,
        "turns_per_s": round(turns / duration, 1),
        "writer_ops": sum(s["ops"] for s in writer_ops),
        "contexts": sum(s.get("contexts", 0) for s in reader_ops),
        "sql_queries": sum(s.get("queries", 0) for s in reader_ops),
        "reads_per_s": round(sum(s["ops"] for s in reader_ops) / duration, 1),
        "append_p50_ms": round(1000 * max((s["p50"] for s in writer_ops), default=0.0), 2),
        "append_p99_ms": round(1000 * max((s["p99"] for s in writer_ops), default=0.0), 2),
        "slowest_s": round(slowest["slowest"], 4),
        "slowest_role": slowest.get("role"),
        "shared_session_leaves": shared_leaves,
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--shared-writers", type=int, default=2)
    parser.add_argument("--own-writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "load.db"
        report = run_load(
            db,
            duration=args.duration,
            shared_writers=args.shared_writers,
            own_writers=args.own_writers,
            readers=args.readers,
        )
    print(json.dumps(report, indent=2))
    sys.exit(1 if report["problems"] else 0)


if __name__ == "__main__":
    main()
