"""Import throughput and peak memory, one loader per process (so ru_maxrss is its own).

``python bench_import.py nexus FILE DB`` imports a pi v3 transcript with
``Store.import_jsonl``; ``floor-sql`` times only inserting that import's own rows into
a fresh store (our schema's floor); ``floor-count`` times only counting its messages
with cl100k on one thread (the counter's floor); ``python bench_import.py baseline FILE DB`` is the physical limit:
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
from pathlib import Path

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
    """Import with Store.import_jsonl (the default cl100k counter)."""
    from nexus_store import Store

    with Store(str(db)) as store:
        store.import_jsonl(str(src))
        n = store.conn.execute("select count(*) from turns").fetchone()[0]
    return int(n), "import_jsonl"


def floor_sql(src: Path, db: Path) -> tuple[float, int]:
    """Seconds to store the import's own rows with executemany alone: our schema's floor.

    The file is imported once (not timed); its turns and messages rows are read back and
    inserted into a fresh store the way the importer writes them (the messages join the
    search tail and are indexed with one insert-select before the commit,
    `indexqueue.index_tail`), in one transaction, with no parsing, codec, counting or
    path values.
    """
    from nexus_store import Store
    from nexus_store.store.indexqueue import index_tail

    scratch = db.with_name(db.name + ".src")
    with Store(str(scratch)) as store:
        store.import_jsonl(str(src))
        session = store.conn.execute("select * from sessions").fetchone()
        turns = store.conn.execute("select * from turns order by id").fetchall()
        messages = store.conn.execute("select * from messages order by id").fetchall()
        turn_cols = [d[1] for d in store.conn.execute("pragma table_info(turns)")]
        msg_cols = [d[1] for d in store.conn.execute("pragma table_info(messages)")]
        ses_cols = [d[1] for d in store.conn.execute("pragma table_info(sessions)")]
    for suffix in ("", "-wal", "-shm"):
        Path(str(scratch) + suffix).unlink(missing_ok=True)

    def insert(table: str, cols: list[str]) -> str:
        return f"insert into {table} ({', '.join(cols)}) values ({', '.join('?' * len(cols))})"

    with Store(str(db)) as store:
        conn = store.conn
        t0 = time.perf_counter()
        with store.atomic():
            row = dict(zip(ses_cols, session, strict=True))
            leaf, row["active_leaf_id"] = row["active_leaf_id"], None  # set once it exists
            conn.execute(insert("sessions", ses_cols), list(row.values()))
            for i in range(0, len(turns), 500):
                conn.executemany(insert("turns", turn_cols), turns[i : i + 500])
            for i in range(0, len(messages), 500):
                conn.executemany(insert("messages", msg_cols), messages[i : i + 500])
            index_tail(store.handle)  # (ids above the watermark: no trigger indexed them)
            conn.execute("update sessions set active_leaf_id = ?", [leaf])
        return time.perf_counter() - t0, len(turns)


def floor_count(src: Path) -> tuple[float, int]:
    """Seconds to count the file's message payloads with cl100k on one thread (not parsed)."""
    from nexus_store.formats import parse_file
    from nexus_store.rows import turn_payload
    from nexus_store.tokens import Cl100kCounter, message_payload

    payloads = []
    n = 0
    for session in parse_file(src):
        for parsed in session.entries:
            n += 1
            _, _, messages = turn_payload(parsed.entry)
            payloads.extend(message_payload(m) for m in messages)
    counter = Cl100kCounter()
    counter.count(["load the encoder first"])
    t0 = time.perf_counter()
    counter.count_batch(payloads)
    return time.perf_counter() - t0, n


def main() -> None:
    mode, src, db = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if mode == "floor-sql":
        dt, rows = floor_sql(src, db)
        how = "rows only"
    elif mode == "floor-count":
        dt, rows = floor_count(src)
        how = "cl100k only"
    else:
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
