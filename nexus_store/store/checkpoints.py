"""Sync checkpoints and OpenClaw lineage: the rows of ``sync_sources`` and ``session_lineage``.

A part that takes the database connection (no mixin): `nexus_store.sync` asks it what
was read of each source and records what a sync read, in the same transaction as
the entries it stored, so a checkpoint never runs ahead of the data.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from nexus_store.store.db import utc_now

__all__ = ["Checkpoint", "Checkpoints"]

_COLUMNS = (
    "path",
    "member",
    "kind",
    "format",
    "device",
    "inode",
    "size",
    "mtime_ns",
    "byte_offset",
    "lines",
    "tail_sha256",
    "last_seq",
    "state_json",
    "session_id",
    "status",
    "message",
    "synced_utc",
)

# One statement for insert and update (SQLite 3.24+ and PostgreSQL share the syntax).
UPSERT_SQL = (
    "insert into sync_sources ("
    + ", ".join(_COLUMNS)
    + ") values ("
    + ", ".join("?" * len(_COLUMNS))
    + ") on conflict (path, member) do update set "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[2:])
)
SELECT_SQL = "select " + ", ".join(_COLUMNS) + " from sync_sources where path = ? and member = ?"
MEMBERS_SQL = "select " + ", ".join(_COLUMNS) + " from sync_sources where path = ? and member <> ''"
# Sessions whose earlier window was stored after them: link them now.
LINK_PARENTS_SQL = """
update sessions set parent_session_id = (
    select p.id from session_lineage l join sessions p on p.source_id = l.previous_source_id
    where l.session_id = sessions.id and p.id <> sessions.id order by p.id limit 1
)
where parent_session_id is null and id in (
    select l.session_id from session_lineage l join sessions p
    on p.source_id = l.previous_source_id and p.id <> l.session_id
)
"""


@dataclass
class Checkpoint:
    """What sync last read of one source (a file, or one OpenClaw session in a database).

    Attributes mirror the ``sync_sources`` columns; ``state`` is ``state_json``
    decoded and ``session_id`` the session's key (an integer).
    """

    path: str
    member: str = ""
    kind: str = "jsonl"
    format: str | None = None
    device: int | None = None
    inode: int | None = None
    size: int | None = None
    mtime_ns: int | None = None
    byte_offset: int = 0
    lines: int = 0
    tail_sha256: str | None = None
    last_seq: int | None = None
    state: dict[str, Any] | None = None
    session_id: int | None = None
    status: str = "ok"
    message: str | None = None
    synced_utc: str = ""


def _from_row(row: tuple[Any, ...]) -> Checkpoint:
    values = dict(zip(_COLUMNS, row, strict=True))
    state = values.pop("state_json")
    return Checkpoint(**values, state=None if state is None else json.loads(state))


class Checkpoints:
    """Read and write sync checkpoints and session lineage over one connection."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def get(self, path: str, member: str = "") -> Checkpoint | None:
        """The checkpoint of a source, or None if sync never read it.

        Args:
            path: The file's absolute path.
            member: '' for the file; an OpenClaw session id inside it.
        """
        row = self.conn.execute(SELECT_SQL, [path, member]).fetchone()
        return None if row is None else _from_row(tuple(row))

    def members(self, path: str) -> dict[str, Checkpoint]:
        """The checkpoints of the OpenClaw sessions read from one database file."""
        return {
            str(row[1]): _from_row(tuple(row)) for row in self.conn.execute(MEMBERS_SQL, [path])
        }

    def put(self, checkpoint: Checkpoint) -> None:
        """Record a checkpoint (insert or replace the source's row).

        Args:
            checkpoint: What was read; ``synced_utc`` is set to now.
        """
        checkpoint.synced_utc = utc_now()
        values = []
        for column in _COLUMNS:
            if column == "state_json":
                state = checkpoint.state
                values.append(None if state is None else json.dumps(state, ensure_ascii=False))
            else:
                values.append(getattr(checkpoint, column))
        self.conn.execute(UPSERT_SQL, values)

    def paths_under(self, folder: str) -> list[str]:
        """The files read before (status ok) at ``folder`` or below it."""
        prefix = folder.rstrip(os.sep) + os.sep
        rows = self.conn.execute(
            "select path from sync_sources where member = '' and status = 'ok' and "
            "(path = ? or substr(path, 1, ?) = ?)",
            [folder, len(prefix), prefix],
        ).fetchall()
        return [str(row[0]) for row in rows]

    def session_key(self, session_uid: str) -> int | None:
        """The integer key of a session by its public id (None if absent)."""
        row = self.conn.execute("select id from sessions where uid = ?", [session_uid]).fetchone()
        return None if row is None else int(row[0])

    def message_after(self, session_key: int, uid: str) -> tuple[bool, str | None]:
        """For an NDJSON boundary: is ``uid`` a stored message, and which message follows it.

        NDJSON entries are chained in file order (each one the child of the one
        before), so the first message after a message is found by following the
        first child down until a message turn.

        Args:
            session_key: The session's integer key.
            uid: The boundary message's id.

        Returns:
            (whether ``uid`` is a message turn of the session, the uid of the first
            message turn after it or None when none is stored after it).
        """
        row = self.conn.execute(
            "select id, kind from turns where session_id = ? and uid = ?", [session_key, uid]
        ).fetchone()
        if row is None or row[1] != "message":
            return False, None
        current = int(row[0])
        while True:
            child = self.conn.execute(
                "select id, kind, uid from turns where parent_id = ? order by seq limit 1",
                [current],
            ).fetchone()
            if child is None:
                return True, None
            if child[1] == "message":
                return True, str(child[2])
            current = int(child[0])

    def record_lineage(
        self,
        session_key: int,
        *,
        previous_source_id: str | None,
        reason: str | None,
        openclaw_key: str | None,
        source_path: str,
    ) -> None:
        """Record which earlier OpenClaw window a session continues, and link its parent.

        Args:
            session_key: The session's integer key.
            previous_source_id: The earlier window's OpenClaw session id.
            reason: Why the window started (reset, rollover, fork, rewind, compaction...).
            openclaw_key: OpenClaw's logical session key.
            source_path: The database file.
        """
        self.conn.execute(
            "insert into session_lineage (session_id, previous_source_id, reason, session_key, "
            "source_path) values (?, ?, ?, ?, ?) on conflict (session_id) do update set "
            "previous_source_id = excluded.previous_source_id, reason = excluded.reason, "
            "session_key = excluded.session_key, source_path = excluded.source_path",
            [session_key, previous_source_id, reason, openclaw_key, source_path],
        )

    def link_parents(self) -> None:
        """Point sessions at their earlier window's session where both are stored now."""
        self.conn.execute(LINK_PARENTS_SQL)
