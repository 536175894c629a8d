"""Raw ``sqlite3``: the physical limit for the same rows and the same path walk.

One table, integer keys, the entry JSON as text. An append is one ``INSERT`` in its own
``BEGIN IMMEDIATE`` transaction at the same journal mode and ``synchronous`` setting as
nexus_store (WAL + NORMAL, or FULL). Loading a leaf's context is one recursive CTE from
the leaf to the root on integer keys, rows parsed with ``json.loads`` and turned into
messages with the same pi rules as the JSONL peer. It stores no path values, so it reads
the whole path whether or not a compaction sits near the leaf.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Peer, batched
from .jsonl_tree import build_context

SCHEMA = """
create table if not exists turns (
    seq integer primary key,
    id text not null unique,
    parent integer references turns(seq),
    kind text not null,
    body text not null
);
"""
INSERT_SQL = (
    "insert into turns (id, parent, kind, body) "
    "values (?, (select seq from turns where id = ?), ?, ?)"
)
# Walk from the leaf up to the root on integer keys (only seq travels through the CTE),
# then read the bodies in seq order: a parent is always appended before its children, so
# seq order is root -> leaf, and the rowid lookups need no sort of the bodies.
PATH_SQL = """
with recursive path(seq, parent) as (
    select seq, parent from turns where id = ?
    union all
    select t.seq, t.parent from turns t join path on t.seq = path.parent
)
select body from turns where seq in (select seq from path) order by seq
"""


class RawSqlitePeer(Peer):
    """One table and one recursive CTE: what SQLite itself can do."""

    name = "raw sqlite3"
    compaction = True
    branches = True

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        self.durability = f"WAL {synchronous}"
        self.path = self.dir / "raw.db"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("pragma journal_mode=wal")
        self.conn.execute(f"pragma synchronous={synchronous}")
        self.conn.executescript(SCHEMA)
        self.leaf: str | None = None

    @staticmethod
    def _row(e: dict[str, Any]) -> tuple[Any, ...]:
        return (e["id"], e.get("parentId"), e["type"], json.dumps(e, separators=(",", ":")))

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        for chunk in batched(entries, 5000):
            self.conn.execute("begin immediate")
            self.conn.executemany(INSERT_SQL, [self._row(e) for e in chunk])
            self.conn.execute("commit")
            self.leaf = chunk[-1]["id"]

    def append_one(self, entry: dict[str, Any]) -> None:
        self.conn.execute("begin immediate")
        self.conn.execute(INSERT_SQL, self._row(entry))
        self.conn.execute("commit")
        self.leaf = entry["id"]

    def append_batch(self, entries: list[dict[str, Any]]) -> None:
        self.conn.execute("begin immediate")
        for e in entries:
            self.conn.execute(INSERT_SQL, self._row(e))
        self.conn.execute("commit")
        self.leaf = entries[-1]["id"]

    def context(self, leaf_id: str | None = None) -> int:
        rows = self.conn.execute(PATH_SQL, (leaf_id or self.leaf,)).fetchall()
        return len(build_context([json.loads(r[0]) for r in rows], None))

    def fork(self, parent_id: str, entry: dict[str, Any]) -> str:
        e = dict(entry, parentId=parent_id)
        self.conn.execute("begin immediate")
        self.conn.execute(INSERT_SQL, self._row(e))
        self.conn.execute("commit")
        return str(e["id"])

    def disk_bytes(self) -> int:
        self.conn.execute("pragma wal_checkpoint(truncate)")
        return super().disk_bytes()

    def close(self) -> None:
        self.conn.close()
