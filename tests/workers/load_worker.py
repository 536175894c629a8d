"""One process of the load test: a writer or a reader, for a bounded time.

    python -m tests.workers.load_worker DB ROLE WORKER_ID SESSION DURATION LOG

ROLE is ``writer`` (append to SESSION) or ``reader`` (assemble SESSION's contexts
and run read-only SQL, checking that every read is consistent). A writer logs one
JSON line per committed turn to LOG (``{"id", "text"}``); both end with one
``{"summary": ...}`` line: operations, the slowest one, and every error met.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

from nexus_store import Store
from nexus_store.store.readonly import run_readonly


def _writer(store: Store, worker: str, session: str, deadline: float, log) -> dict:  # type: ignore[no-untyped-def]
    n = ops = 0
    slowest = 0.0
    errors: list[str] = []
    latencies: list[float] = []
    last: str | None = None
    rng = random.Random(worker)
    while time.monotonic() < deadline:
        text = f"{worker}-{n}"
        entry: dict = {
            "type": "message",
            "message": {"role": "user", "content": text * 3, "timestamp": n},
        }
        if last is not None and rng.random() < 0.1:
            entry["parentId"] = last  # sometimes continue our own turn: a branch
        start = time.perf_counter()
        try:
            turn = store.append_entry(session, entry)
        except Exception as err:  # report every error, documented or not
            errors.append(f"{type(err).__name__}: {err}")
            continue
        finally:
            ops += 1
            latencies.append(time.perf_counter() - start)
            slowest = max(slowest, latencies[-1])
        log.write(json.dumps({"id": turn.id, "text": text}) + "\n")
        log.flush()
        last = turn.id
        n += 1
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else 0.0
    p50 = latencies[len(latencies) // 2] if latencies else 0.0
    return {
        "role": "writer",
        "ops": ops,
        "turns": n,
        "slowest": slowest,
        "p50": p50,
        "p99": p99,
        "errors": errors,
    }


def _reader(store: Store, db: str, session: str, deadline: float) -> dict:
    ops = contexts = queries = 0
    slowest = 0.0
    errors: list[str] = []
    while time.monotonic() < deadline:
        start = time.perf_counter()
        try:
            if ops % 3 == 2:
                _, rows = run_readonly(
                    db,
                    "with recursive up(id, parent_id, n) as (select id, parent_id, 0 from turns "
                    "where id = (select max(id) from turns) union all select t.id, t.parent_id, "
                    "n + 1 from up join turns t on t.id = up.parent_id) select count(*), "
                    "(select depth + 1 from turns where id = (select max(id) from turns)) from up",
                )
                (walked, depth) = next(rows)
                list(rows)
                if depth is not None and walked != depth:
                    errors.append(f"inconsistent: walked {walked} turns up from depth {depth}")
                queries += 1
            else:
                ctx = store.context(session)
                if ctx.leaf_id is not None:
                    path = store.path(session, ctx.leaf_id)
                    if path[-1].id != ctx.leaf_id or path[0].parent_id is not None:
                        errors.append("inconsistent: path does not run root -> leaf")
                    for parent, child in itertools.pairwise(path):
                        if child.parent_id != parent.id or child.depth != parent.depth + 1:
                            errors.append(f"inconsistent: {child.id} is not a child of {parent.id}")
                            break
                    if sum(t.tokens for t in path) != ctx.tokens:
                        errors.append(f"inconsistent: tokens {ctx.tokens} != path sum")
                    if len(ctx.messages) != sum(1 for t in path if t.kind == "message"):
                        errors.append("inconsistent: messages do not match the path")
                contexts += 1
        except Exception as err:
            errors.append(f"{type(err).__name__}: {err}")
        ops += 1
        slowest = max(slowest, time.perf_counter() - start)
    return {
        "role": "reader",
        "ops": ops,
        "contexts": contexts,
        "queries": queries,
        "slowest": slowest,
        "errors": errors[:20],
    }


def main(argv: list[str]) -> None:
    db, role, worker, session, duration, log_path = argv
    deadline = time.monotonic() + float(duration)
    busy = float(os.environ.get("NEXUS_TEST_BUSY_TIMEOUT", "5"))
    with Store(db, counter="chars4", busy_timeout=busy) as store, Path(log_path).open("a") as log:
        if role == "writer":
            summary = _writer(store, worker, session, deadline, log)
        else:
            summary = _reader(store, db, session, deadline)
        log.write(json.dumps({"summary": summary}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
