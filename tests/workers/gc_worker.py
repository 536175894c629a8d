"""Processes for the gc tests (issue 18, item 1).

    python -m tests.workers.gc_worker DB gc LOG BATCH      gc in batches, one line per batch
    python -m tests.workers.gc_worker DB write LOG SESSION  append until killed, one line each

``gc`` logs ``{"done": N}`` after each committed batch and sleeps a little, so that
the test can kill it between batches (or inside one). ``write`` appends one turn
per transaction to SESSION and logs each committed id, or the error that stopped it.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from nexus_store import Store

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def main(argv: list[str]) -> None:
    db, mode, log_path, arg = argv[:4]
    with Store(db, counter="chars4") as store, Path(log_path).open("a") as log:
        if mode == "gc":

            def progress(done: int, total: int) -> None:
                log.write(json.dumps({"done": done, "total": total}) + "\n")
                log.flush()
                time.sleep(0.02)

            store.gc(
                all_sessions=True,
                dead_branches_older_than=30,
                compacted_older_than=30,
                now=NOW,
                batch_size=int(arg),
                progress=progress,
                vacuum=False,
            )
            log.write(json.dumps({"finished": True}) + "\n")
            return
        log.write(json.dumps({"ready": True}) + "\n")
        log.flush()
        n = 0
        while True:
            try:
                turn = store.append_message(
                    arg, {"role": "user", "content": f"w{n}", "timestamp": n}
                )
            except Exception as err:  # the test asserts there is none
                log.write(json.dumps({"error": f"{type(err).__name__}: {err}"}) + "\n")
                log.flush()
                raise
            log.write(json.dumps({"id": turn.id}) + "\n")
            log.flush()
            n += 1


if __name__ == "__main__":
    main(sys.argv[1:])
