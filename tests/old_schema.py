"""Stores in the layout of an earlier schema, for migration tests.

Today's write path cannot write an older layout (its insert names today's columns), so
an old store is made the way an old nexus_store would have left it: an empty database
migrated up to a given schema file, then the rows of a store written today copied into
it, column by column, with each message's content plain (from the view
``messages_text``, which shows ``messages`` as it was before schema 0065).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nexus_store import Store, migrate
from nexus_store.store import compressed

_TABLES = ("settings", "sessions", "turns", "messages")


def columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    return [row[1] for row in conn.execute(f"pragma {schema}.table_info({table})")]


def copy_to_old_schema(
    source: Path, target: Path, upto: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write ``target`` as a store migrated up to schema file ``upto`` (its stem), holding ``source``'s rows."""
    files = [f for f in migrate.schema_files() if f.stem <= upto]
    with monkeypatch.context() as patch:
        patch.setattr(migrate, "schema_files", lambda: files)
        Store(target, counter="chars4").close()
    conn = sqlite3.connect(target, isolation_level=None)
    compressed.register(conn)  # the view decompresses
    try:
        conn.execute("attach ? as src", [str(source)])
        conn.execute("begin")
        conn.execute("delete from settings")
        for table in _TABLES:
            wanted = columns(conn, table)
            origin = "messages_text" if table == "messages" else table
            have = set(columns(conn, origin, "src"))
            names = ", ".join(c for c in wanted if c in have)
            conn.execute(f"insert into main.{table} ({names}) select {names} from src.{origin}")
        conn.execute("commit")
        conn.execute("detach src")
    finally:
        conn.close()
