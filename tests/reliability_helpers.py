"""Helpers shared by the reliability, doctor, gc and security tests."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from nexus_store import Store
from nexus_store.store import compressed


def stamp(day: int, hour: int = 0) -> str:
    """An ISO time ``day`` days after 2020-01-01 (UTC), as pi writes it."""
    from datetime import UTC, datetime, timedelta

    moment = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=day, hours=hour)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def msg(text: str, day: int = 0, *, role: str = "user", **entry: Any) -> dict[str, Any]:
    """A message entry with a timestamp ``day`` days after 2020-01-01."""
    return {
        "type": "message",
        "timestamp": stamp(day),
        "message": {"role": role, "content": text, "timestamp": 0},
        **entry,
    }


def dump(path: Path) -> str:
    """The SQL dump of a database file (its logical content)."""
    conn = sqlite3.connect(path)
    compressed.register(conn)  # the search index reads its text through them (schema 0065)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def file_hashes(path: Path) -> dict[str, str]:
    """sha256 of the database file and its -wal / -shm companions that exist."""
    found = {}
    for suffix in ("", "-wal", "-shm"):
        f = Path(str(path) + suffix)
        if f.exists():
            found[suffix or "db"] = hashlib.sha256(f.read_bytes()).hexdigest()
    return found


def all_contexts(store: Store, session_id: str) -> dict[str, Any]:
    """The context of every leaf and of the active leaf, by turn id."""
    ids = {t.id for t in store.leaves(session_id)}
    active = store.get_session(session_id).active_leaf
    if active is not None:
        ids.add(active)
    return {i: store.context(session_id, i).model_dump() for i in sorted(ids)}


def raw(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection (foreign keys off), for corrupting a file on purpose."""
    return sqlite3.connect(path, isolation_level=None)
