"""A writer that the crash tests kill with SIGKILL at random points.

    python -m tests.workers.crash_worker DB MODE LOG [SEED]

MODE is ``append`` (one turn per transaction), ``ingest`` (transcripts of 150
entries, each one ``Store.ingest`` call, the import path) or ``compact`` (messages
with a compaction entry every few turns, as compaction writes it: one
``append_entry``). After each commit the worker appends one JSON line to LOG, so
every logged write was committed; at most one committed write is not yet logged
when the kill lands.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from nexus_store import Store

INGEST_SIZE = 150


def _entries(source: str, n: int):  # type: ignore[no-untyped-def]
    parent = None
    for i in range(n):
        uid = f"{source}-{i}"
        yield (
            i + 2,
            {
                "type": "message",
                "id": uid,
                "parentId": parent,
                "timestamp": "2024-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"line {i} " * 20, "timestamp": i},
            },
            None,
        )
        parent = uid


def main(argv: list[str]) -> None:
    db, mode, log_path = argv[:3]
    rng = random.Random(argv[3] if len(argv) > 3 else None)
    with Store(db, counter="chars4") as store, Path(log_path).open("a") as log:
        session = store.create_session().id if mode != "ingest" else None
        log.write(json.dumps({"ready": True, "session": session}) + "\n")
        log.flush()
        n = 0
        while True:
            log.write(json.dumps({"start": n}) + "\n")  # a kill before the next line: in flight
            log.flush()
            if mode == "ingest":
                source = f"{rng.getrandbits(64):016x}"
                header = {"type": "session", "id": source, "timestamp": "2024-01-01T00:00:00Z"}
                sid, counts = store.ingest(
                    header,
                    _entries(source, INGEST_SIZE),
                    source_format="crashtest",
                    source_id=source,
                )
                record = {"session": sid, "source": source, "turns": counts.turns}
            elif mode == "compact" and n % 5 == 4:
                path = store.path(session)  # type: ignore[arg-type]
                first = path[max(0, len(path) - 3)].id
                turn = store.append_compaction(session, f"summary {n} " * 30, first, 1000)  # type: ignore[arg-type]
                record = {"id": turn.id, "kind": "compaction"}
            else:
                turn = store.append_message(
                    session,  # type: ignore[arg-type]
                    {"role": "user", "content": f"burst {n} " * 20, "timestamp": n},
                )
                record = {"id": turn.id, "kind": "message"}
            log.write(json.dumps(record) + "\n")
            log.flush()
            n += 1


if __name__ == "__main__":
    main(sys.argv[1:])
