"""Build OpenClaw agent databases from the CREATE statements of real releases (tests only).

tests/fixtures/openclaw/agent_schema_v19.sql (OpenClaw 2026.8.2) and _v23.sql (2026.9.6)
hold the tables nexus_store reads, as those releases create them. Rows are written the
way OpenClaw writes them: the session header as the first event, then one pi entry per
row with its identity row; from v23 a row may be zstd-compressed (level 1, with a
checksum, as OpenClaw's zlib.zstdCompressSync call) with its navigation metadata.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import zstandard

FIXTURES = Path(__file__).parent / "fixtures" / "openclaw"
VERSIONS = (19, 23)


def octet_length(value: Any) -> int | None:
    if value is None:
        return None
    return len(value.encode("utf-8") if isinstance(value, str) else value)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=0)
    # SQLite before 3.43 lacks octet_length, which the v23 CHECK constraints call.
    conn.create_function("octet_length", 1, octet_length, deterministic=True)
    conn.execute("pragma journal_mode=wal")
    return conn


def create(path: Path, version: int) -> sqlite3.Connection:
    conn = connect(path)
    conn.executescript((FIXTURES / f"agent_schema_v{version}.sql").read_text())
    conn.execute(f"pragma user_version = {version}")
    return conn


def navigation(entry: dict[str, Any]) -> str:
    return json.dumps(
        {
            "version": 1,
            "report": {"kind": "canonical"},
            "navigation": {"id": entry.get("id"), "parentId": entry.get("parentId")},
            "reset": {},
            "model": {},
            "modelBytes": 10,
            "modelWithoutCheckpointBytes": 10,
            "withoutCustomDataBytes": 10,
        }
    )


def add_window(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    key: str = "agent:main:main",
    previous: str | None = None,
    reason: str | None = "initial",
    created_at: int = 0,
) -> None:
    conn.execute(
        "insert or ignore into session_nodes (session_key, current_session_id, entry_json, "
        "updated_at) values (?, ?, '{}', ?)",
        [key, session_id, created_at],
    )
    conn.execute(
        "insert into session_windows (session_id, session_key, previous_session_id, reason, "
        "created_at, updated_at) values (?, ?, ?, ?, ?, ?)",
        [session_id, key, previous, reason, created_at, created_at],
    )


def add_events(
    conn: sqlite3.Connection,
    session_id: str,
    events: list[dict[str, Any]],
    *,
    start_seq: int = 0,
    compress: bool = False,
) -> None:
    """Append events (header and entries) in one write transaction, as OpenClaw does."""
    conn.execute("begin immediate")
    for seq, event in enumerate(events, start_seq):
        text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        raw = text.encode("utf-8")
        if compress and event.get("type") != "session":
            blob = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(raw)
            conn.execute(
                "insert into transcript_events (session_id, seq, event_json, created_at, "
                "event_zstd, event_utf8_bytes, navigation_json) values (?, ?, null, 0, ?, ?, ?)",
                [session_id, seq, blob, len(raw), navigation(event)],
            )
        else:
            conn.execute(
                "insert into transcript_events (session_id, seq, event_json, created_at) "
                "values (?, ?, ?, 0)",
                [session_id, seq, text],
            )
        if isinstance(event.get("id"), str) and event.get("type") != "session":
            conn.execute(
                "insert into transcript_event_identities (session_id, event_id, seq, event_type, "
                "parent_id, created_at) values (?, ?, ?, ?, ?, 0)",
                [session_id, event["id"], seq, event.get("type"), event.get("parentId")],
            )
    conn.execute("commit")


def header(session_id: str) -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-09-01T10:00:00.000Z",
        "cwd": "/work/repo",
    }


def conversation(prefix: str, turns: int, *, compact_at: int | None = None) -> list[dict[str, Any]]:
    """pi entries: user/assistant pairs, a tool result every third turn, an optional compaction."""
    entries: list[dict[str, Any]] = []
    parent: str | None = None
    ms = 1_788_000_000_000

    def add(entry: dict[str, Any]) -> None:
        nonlocal parent
        entry["parentId"] = parent
        entries.append(entry)
        parent = entry["id"]

    for n in range(turns):
        ts = f"2026-09-01T10:{n // 60:02d}:{n % 60:02d}.000Z"
        add(
            {
                "type": "message",
                "id": f"{prefix}u{n}",
                "timestamp": ts,
                "message": {
                    "role": "user",
                    "content": f"question {n} " + "x" * 1500,
                    "timestamp": ms,
                },
            }
        )
        add(
            {
                "type": "message",
                "id": f"{prefix}a{n}",
                "timestamp": ts,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"answer {n} " + "y" * 1200}],
                    "provider": "openai",
                    "model": "gpt-test",
                    "usage": {
                        "input": 10,
                        "output": 5,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "totalTokens": 15,
                    },
                    "stopReason": "stop",
                    "timestamp": ms,
                },
            }
        )
        if n % 3 == 2:
            add(
                {
                    "type": "message",
                    "id": f"{prefix}t{n}",
                    "timestamp": ts,
                    "message": {
                        "role": "toolResult",
                        "toolCallId": f"call{n}",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "file " * 400}],
                        "isError": False,
                        "timestamp": ms,
                    },
                }
            )
        if compact_at is not None and n == compact_at:
            add(
                {
                    "type": "compaction",
                    "id": f"{prefix}c{n}",
                    "timestamp": ts,
                    "summary": f"summary up to turn {n}",
                    "firstKeptEntryId": f"{prefix}u{n}",
                    "tokensBefore": 12345,
                }
            )
    return entries
