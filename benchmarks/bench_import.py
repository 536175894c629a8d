"""Import throughput and peak memory, one loader per process (so ru_maxrss is its own).

``python bench_import.py nexus FILE DB`` imports a pi v3 transcript with
``Store.import_jsonl``; ``python bench_import.py baseline FILE DB`` is the physical limit:
read lines, ``json.loads`` each, and ``executemany`` the same turn rows (id, parent, type,
timestamp, JSON body) in batches of 10,000 into one plain table, WAL + NORMAL, one
transaction. Both print one JSON object: seconds, rows, peak RSS in bytes.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BASELINE_SCHEMA = (
    "create table turns (seq integer primary key, id text not null, parent_id text, "
    "kind text not null, timestamp text, body text not null)"
)

INSERT_SQL = "insert into turns (id, parent_id, kind, timestamp, body) values (?, ?, ?, ?, ?)"


def baseline(src: Path, db: Path) -> int:
    """The physical limit: json.loads + executemany of the turn rows, one transaction."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("pragma journal_mode=wal")
    conn.execute("pragma synchronous=normal")
    conn.execute(BASELINE_SCHEMA)
    conn.execute("begin immediate")
    n = 0
    batch: list[tuple[object, ...]] = []
    with src.open("rb") as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "session":
                continue
            batch.append((e["id"], e.get("parentId"), e["type"], e.get("timestamp"), line.decode()))
            if len(batch) == 10_000:
                conn.executemany(INSERT_SQL, batch)
                n += len(batch)
                batch.clear()
    conn.executemany(
        "insert into turns (id, parent_id, kind, timestamp, body) values (?, ?, ?, ?, ?)", batch
    )
    n += len(batch)
    conn.execute("commit")
    conn.close()
    return n


def nexus(src: Path, db: Path) -> tuple[int, str]:
    """Import with Store.import_jsonl; until the importer lands, stream into Store.ingest."""
    from nexus_store import Store

    with Store(str(db)) as store:
        if hasattr(store, "import_jsonl"):
            ids = store.import_jsonl(str(src))
            return len(ids), "import_jsonl"
        try:
            from nexus_store.formats import parse_file
        except ImportError:
            parse_file = None
        if parse_file is not None:
            # import_jsonl is not merged yet: the format reader + the core's ingest are
            # the two halves it will join.
            n = 0
            for session in parse_file(src):
                store.ingest(
                    session.header,
                    ((p.line, p.entry, p.patch) for p in session.entries),
                    source_format=session.source_format,
                    source_id=session.source_id,
                    source_path=session.path,
                    source_version=session.source_version,
                    parent_source_id=session.parent_source_id,
                )
                n += 1
            return n, "parse_file+ingest"
        # No pi parser either: read lines and hand them to the core's transactional
        # ingest, so the number measures storage, not parsing rules.
        with src.open("rb") as f:
            header = json.loads(f.readline())

            def entries() -> Iterator[tuple[int, dict[str, Any], None]]:
                for i, line in enumerate(f, start=2):
                    yield i, json.loads(line), None

            store.ingest(
                header,
                entries(),
                source_format="pi",
                source_id=header["id"],
                source_path=str(src),
                source_version=header.get("version"),
            )
        n = store.conn.execute("select count(*) from turns").fetchone()[0]
        return int(n), "ingest"


def main() -> None:
    mode, src, db = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    t0 = time.perf_counter()
    rows, how = (baseline(src, db), "executemany") if mode == "baseline" else nexus(src, db)
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "rows": rows, "peak_rss": peak_rss(), "via": how}))


def peak_rss() -> int:
    """Peak resident set of this process in bytes.

    VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child started from a
    big parent would report the parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


if __name__ == "__main__":
    main()
