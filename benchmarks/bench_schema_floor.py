"""nexus_store's own schema written by straight-line code: the floor of its append path.

`SchemaFloor` writes the turns workload of ``bench_turns.py`` into a database that
nexus_store created (its tables, indexes, triggers and foreign keys, the same pragmas),
the same rows the store writes for these messages, with the work DESIGN.md requires
(the exact cl100k count, zstd of content of ``compressed.THRESHOLD`` bytes or more, the
search tail indexed every 256 messages with the store's own statement, the session row
once per commit), and nothing else: no validation, no general encoding of any message
shape, no path values beyond a straight chain, no returned ``Turn``. It knows only this
workload's message shapes (string content or one text block), so it is a floor to
measure against, not a store.

The distance from nexus_store to this floor is what the store's Python costs beyond
its schema; the distance from this floor to the plain tree's floor with lookups is what
the schema itself costs (wider rows, more indexes, the triggers).

`LeanPath` is the same floor plus the steps an append path must keep whatever its shape:
the entry's validation (`_validate_native`), `turn_payload`, the general message encoding
(`encode_message`, `pack_rows`) with the message insert's column lists, and the returned
`Turn`. It has none of the store's bookkeeping (the check that no other writer moved the
session, the transaction's marks, the generic 44-column turn row), so it is the target
of a rewrite of the append path around the common case, a little above what a real
store (which needs that check) can reach.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path
from typing import Any

#: The record's peer name (a floor row of the turns table).
NAME = "nexus_store schema, straight-line"
#: The lean path's peer name.
LEAN = "nexus_store lean path (prototype)"

_TURN_SQL = (
    "insert into turns (session_id, uid, parent_id, seq, kind, created_utc, depth, tokens, "
    "path_tokens, context_tokens, compaction_count, active_model_json, "
    "active_thinking_level, run_start_seq) values (?, ?, ?, ?, 'message', ?, ?, ?, ?, ?, 0, ?, "
    "'off', 0)"
)
_MESSAGE_SQL = (
    "insert into messages (turn_id, idx, role, content_kind, text, tokens, model, "
    "stop_reason, timestamp_ms, tool_call_id, tool_name, is_error, content_zstd) "
    "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SESSION_SQL = "update sessions set active_leaf_id = ?, updated_utc = ?, last_seq = ? where id = ?"


class FloorCommits:
    """How a floor commits: a turn in a transaction of its own, or all turns in one.

    The floor's ``_write`` writes one turn's rows, ``_index`` drains its search tail and
    ``_session_row`` writes the session row, once per commit as the store does.
    """

    conn: sqlite3.Connection

    def _write(self, msgs: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _index(self) -> None:
        raise NotImplementedError

    def _session_row(self) -> None:
        raise NotImplementedError

    def turn(self, msgs: list[dict[str, Any]]) -> None:
        self.conn.execute("begin immediate")
        self._write(msgs)  # (the tail is indexed every 256 messages, as the store does:
        self._session_row()  # its search indexes the tail first, so stays exact)
        self.conn.execute("commit")

    def batch(self, ts: list[list[dict[str, Any]]]) -> None:
        self.conn.execute("begin immediate")
        for msgs in ts:
            self._write(msgs)
        self._index()
        self._session_row()
        self.conn.execute("commit")


class SchemaFloor(FloorCommits):
    """The turns workload written straight into nexus_store's schema (see the module)."""

    name = NAME

    def __init__(self, path: Path, sync: str) -> None:
        from nexus_store import Store
        from nexus_store.store import compressed
        from nexus_store.store.db import utc_now
        from nexus_store.store.indexqueue import INDEX_TAIL_SQL
        from nexus_store.tokens import get_counter, message_tokens

        store = Store(str(path), synchronous=sync)  # the schema, migrated as the store does
        self.session = store.create_session(cwd="/bench").id
        store.close()
        self.conn = sqlite3.connect(path, isolation_level=None)
        compressed.register(self.conn)  # the search tail reads text through messages_text
        for pragma in (
            "journal_mode=wal",
            f"synchronous={sync}",
            "foreign_keys=on",
            "recursive_triggers=on",
        ):
            self.conn.execute(f"pragma {pragma}")
        (self.key,) = self.conn.execute(
            "select id from sessions where uid = ?", [self.session]
        ).fetchone()
        self.counter = get_counter("cl100k_base")
        self.counter.count(["warm up"])  # the encoding loads once per process
        self.tokens = message_tokens
        self.compress = compressed.compress
        self.threshold = compressed.THRESHOLD
        self.now = utc_now
        self.index_sql = INDEX_TAIL_SQL
        self.leaf: int | None = None
        self.leaf_uid: str | None = None
        self.model_json: str | None = None
        self.seq = -1
        self.path_tokens = 0
        self.unindexed = 0
        self.indexed_to = 0

    def _turn_row(self, messages: list[dict[str, Any]], counts: list[int]) -> tuple[str, str]:
        """Insert the turn of ``messages`` under the last one, as the store writes it.

        Returns:
            Its uid and its time.
        """
        tokens = sum(counts)
        self.seq += 1
        self.path_tokens += tokens
        model = next((m["model"] for m in messages if m["role"] == "assistant"), None)
        now, uid = self.now(), secrets.token_hex(4)
        self.model_json = None if model is None else f'{{"modelId":"{model}"}}'
        self.leaf = self.conn.execute(
            _TURN_SQL,
            (
                self.key,
                uid,
                self.leaf,
                self.seq,
                now,
                self.seq,
                tokens,
                self.path_tokens,
                self.path_tokens,
                self.model_json,
            ),
        ).lastrowid
        return uid, now

    def _queued(self, count: int) -> None:
        """``count`` messages joined the search tail: drain it once it holds 256."""
        self.unindexed += count
        if self.unindexed >= 256:
            self._index()

    def _write(self, msgs: list[dict[str, Any]]) -> None:
        counts = [self.tokens(self.counter, m) for m in msgs]
        self._turn_row(msgs, counts)
        rows = []
        for idx, (m, count) in enumerate(zip(msgs, counts, strict=True)):
            content = m["content"]
            kind, text = (
                ("string", content) if type(content) is str else ("text_block", content[0]["text"])
            )
            packed = None
            if len(text) >= self.threshold:
                packed, text = self.compress(text), None
            rows.append(
                (
                    self.leaf,
                    idx,
                    m["role"],
                    kind,
                    text,
                    count,
                    m.get("model"),
                    m.get("stopReason"),
                    m.get("timestamp"),
                    m.get("toolCallId"),
                    m.get("toolName"),
                    None if "isError" not in m else int(m["isError"]),
                    packed,
                )
            )
        self.conn.executemany(_MESSAGE_SQL, rows)
        self._queued(len(rows))

    def _index(self) -> None:
        (top,) = self.conn.execute("select max(id) from messages").fetchone()
        self.conn.execute(self.index_sql, [self.indexed_to, top])
        self.conn.execute("update search_watermark set messages_indexed_to = ? where id = 1", [top])
        self.indexed_to, self.unindexed = top, 0

    def _session_row(self) -> None:
        self.conn.execute(_SESSION_SQL, (self.leaf, self.now(), self.seq, self.key))

    def close(self) -> None:
        self.conn.close()


class LeanPath(SchemaFloor):
    """`SchemaFloor` plus validation, the general message encoding and the `Turn` (see the module)."""

    name = LEAN

    def __init__(self, path: Path, sync: str) -> None:
        from nexus_store import jsoncodec, models, rows
        from nexus_store.store import appends, compressed, sql

        super().__init__(path, sync)
        self.loads = jsoncodec.loads
        self.stored_turn = models.stored_turn
        self.encode_message, self.turn_payload = rows.encode_message, rows.turn_payload
        self.validate = appends._validate_native
        self.columns, self.insert_sql = sql.MESSAGE_INSERT_COLUMNS, sql.insert_rows_sql
        self.pack_rows = compressed.pack_rows

    def _write(self, msgs: list[dict[str, Any]]) -> None:
        entry: dict[str, Any] = {"type": "message", "messages": [dict(m) for m in msgs]}
        self.validate(entry)
        kind, _skip, messages = self.turn_payload(entry)
        counts = [self.tokens(self.counter, m) for m in messages]
        parent_uid = self.leaf_uid
        uid, now = self._turn_row(messages, counts)
        self.leaf_uid = uid
        rows = []
        for idx, (message, count) in enumerate(zip(messages, counts, strict=True)):
            row = self.encode_message(message, count)
            row["turn_id"], row["idx"] = self.leaf, idx
            rows.append(row)
        self.pack_rows(rows)
        filled = {c for row in rows for c, v in row.items() if v is not None}
        columns = tuple([c for c in self.columns if c in filled])
        self.conn.execute(
            self.insert_sql("messages", columns, len(rows)),
            [row[c] for row in rows for c in columns],
        )
        self._queued(len(rows))
        final = dict(entry)
        final["id"], final["parentId"] = uid, parent_uid
        self.stored_turn(
            id=uid,
            session_id=self.session,
            parent_id=parent_uid,
            kind=kind,
            seq=self.seq,
            timestamp=now,
            depth=self.seq,
            tokens=sum(counts),
            path_tokens=self.path_tokens,
            context_tokens=self.path_tokens,
            compactions=0,
            compaction_id=None,
            model=None if self.model_json is None else self.loads(self.model_json),
            thinking_level="off",
            entry=final,
        )
