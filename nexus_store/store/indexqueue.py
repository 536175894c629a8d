"""Deferred search indexing: index a transaction's new messages once, at its commit.

SQLite's message index (FTS5 ``messages_fts``) is kept by a trigger that fires once per
inserted row, and each firing writes its own small segment: in a batch of appends that is
half the cost of the batch. Inside a caller's transaction an append therefore pauses
the trigger once (`defer_message_index`) and the handle indexes every message written
since with one ``insert ... select`` just before it commits, or before any other write
part or a search runs in that transaction (`Handle.flush_deferred`). The trigger is
dropped and re-created inside the transaction: other connections never see it missing,
and a rollback restores it. Search is exact after every commit.
"""

from __future__ import annotations

from nexus_store.store.db import Handle

__all__ = ["MESSAGE_TRIGGER", "defer_message_index", "index_since", "pause_message_index"]

MESSAGE_TRIGGER = "messages_fts_after_insert"
_TRIGGER_SQL = "select sql from sqlite_master where type = 'trigger' and name = ?"


def pause_message_index(db: Handle) -> tuple[int, str] | None:
    """Drop the per-row message index trigger (inside a transaction).

    Returns:
        What `index_since` needs (the last message key before the pause and the
        trigger's SQL), or None when there is no trigger to pause (PostgreSQL's
        indexes are GIN indexes on expressions; a trigger already paused).
    """
    if not db.dialect.capabilities.fts_bm25:
        return None
    row = db.execute(_TRIGGER_SQL, [MESSAGE_TRIGGER]).fetchone()
    if row is None:
        return None
    top = int(db.execute("select coalesce(max(id), 0) from messages").fetchone()[0])
    db.execute(f"drop trigger {MESSAGE_TRIGGER}")
    return top, str(row[0])


def index_since(db: Handle, paused: tuple[int, str] | None) -> None:
    """Index the messages written since `pause_message_index` and restore the trigger.

    When a rollback to a savepoint has already restored the trigger, the messages of
    the undone part are gone and those written after it were indexed by the trigger:
    nothing is left to do.
    """
    if paused is None:
        return
    top, trigger_sql = paused
    if db.execute(_TRIGGER_SQL, [MESSAGE_TRIGGER]).fetchone() is not None:
        return
    db.execute(
        # the view gives the text plain (schema 0065: compressed or derived in messages)
        "insert into messages_fts (rowid, text) select id, text from messages_text where id > ?",
        [top],
    )
    db.execute(trigger_sql)


def defer_message_index(db: Handle) -> None:
    """Inside a caller's transaction: index its new messages at commit, in one statement.

    Outside a transaction (an append that commits alone) the trigger indexes the row;
    there is nothing to gather.
    """
    if not db.in_transaction or db.has_deferred(MESSAGE_TRIGGER):
        return
    if not db.dialect.capabilities.fts_bm25:
        return
    paused = pause_message_index(db)
    if paused is not None:
        db.defer(MESSAGE_TRIGGER, lambda: index_since(db, paused))
