"""Search indexing in bulk: the message index follows a watermark (issue 17).

SQLite's message index (FTS5 ``messages_fts``) holds exactly the messages whose id is
at or below ``search_watermark.messages_indexed_to`` (schema/0060_search_watermark.sql).
An append writes no index rows: its messages join the *tail* (the messages above the
watermark), whoever wrote them (the store, sqlite-utils, Datasette). The tail is indexed
with one ``insert ... select`` (`index_tail`), which writes one FTS5 segment for all of
it instead of one per commit:

- at the commit of a transaction that appended, once this handle appended
  `TAIL_MESSAGES` messages or `TAIL_BYTES` of text since its last drain
  (`queue_messages`; a batch or an import past the threshold is indexed before it
  commits). The handle counts what it appended, so a commit below the threshold runs
  no statement for the index at all; other writers' rows join the same tail and are
  indexed with it (or by the next search, or by their own writer's drain);
- before any search the store runs (`ensure_indexed`), so search through the store is
  exact after every commit;
- when a store that appended closes, if the write lock is free at once (`index_at_close`),
  so that readers outside the store (``nexus-store sql``, Datasette, sqlite-utils) find
  the index complete once the writers are done. ``nexus-store sql`` drains a tail itself
  before a query that names the index (`index_file_tail`).

The triggers keep what the index holds: deleting or changing an indexed row (id at or
below the watermark) updates the index at once, and a row inserted at or below the
watermark (an id reused after the top rows were deleted) is indexed at once. The
watermark moves only with the rows it describes, in the same transaction, so a crash or
a rollback between an append and its drain loses nothing: the tail is still above the
watermark and the next drain indexes it. PostgreSQL searches GIN expression indexes that
are always current: nothing to do there.
"""

from __future__ import annotations

import contextlib
import sqlite3
import weakref
from pathlib import Path

from nexus_store.errors import NexusError
from nexus_store.store import compressed
from nexus_store.store.db import Handle

__all__ = [
    "INDEX_TAIL_SQL",
    "TAIL_BYTES",
    "TAIL_MESSAGES",
    "check_message_index",
    "ensure_indexed",
    "index_at_close",
    "index_file_tail",
    "index_tail",
    "queue_messages",
    "rebuild_message_index",
    "tail_state",
]

TAIL_MESSAGES = 256
"""A tail of this many messages is indexed at the commit that makes it (benchmarks/README.md)."""
TAIL_BYTES = 256 * 1024
"""...or once a handle has appended this much text (in characters) since its last drain."""

# The one statement that indexes the tail: the messages with lo < id <= hi, with the
# text the index is declared over: the view messages_text (schema 0065), which gives
# compressed content decompressed and a json message's text derived.
INDEX_TAIL_SQL = (
    "insert into messages_fts (rowid, text) "
    "select id, text from messages_text where id > ? and id <= ?"
)
# (the largest message key, the watermark); the watermark is NULL when its row is missing.
TAIL_STATE_SQL = (
    "select coalesce(max(id), 0), (select messages_indexed_to from search_watermark) from messages"
)
SET_WATERMARK_SQL = "update search_watermark set messages_indexed_to = ? where id = 1"
_RESET_WATERMARK_SQL = (
    "insert or replace into search_watermark (id, messages_indexed_to) "
    "select 1, coalesce(max(id), 0) from messages"
)
_INTEGRITY_SQL = "insert into messages_fts (messages_fts, rank) values ('integrity-check', 1)"
_QUEUED = "search_watermark"  # the handle's deferred-work key for the commit check
_WATERMARKED: weakref.WeakKeyDictionary[Handle, bool] = weakref.WeakKeyDictionary()


def _watermarked(db: Handle) -> bool:
    """Whether the schema has the watermark (a database migrated past 0060; asked once)."""
    known = _WATERMARKED.get(db)
    if known is None:
        row = db.execute(
            "select 1 from sqlite_master where type = 'table' and name = 'search_watermark'"
        ).fetchone()
        known = _WATERMARKED[db] = row is not None
    return known


def tail_state(db: Handle) -> tuple[int, int | None] | None:
    """``(largest message key, watermark)``; None where there is no watermark (PostgreSQL).

    The watermark is None when its row is missing (deleted by hand): the next drain
    rebuilds the index (`index_tail`).
    """
    if not db.dialect.capabilities.fts_bm25 or not _watermarked(db):
        return None
    row = db.execute(TAIL_STATE_SQL).fetchone()
    return int(row[0]), None if row[1] is None else int(row[1])


def index_tail(db: Handle) -> int:
    """Index every message above the watermark and move it to the last one (in a transaction).

    Returns:
        How many messages were indexed (0 when the tail was empty).
    """
    state = tail_state(db)
    if state is None:
        return 0
    top, mark = state
    db.unindexed_bytes = db.unindexed_messages = 0
    if mark is None:
        rebuild_message_index(db)
        return top
    if top == mark:
        return 0
    count = 0
    if top > mark:
        cursor = db.execute(INDEX_TAIL_SQL, [mark, top])
        count = max(cursor.rowcount, 0)
    # top < mark: the newest rows were deleted; the index holds none of (top, mark], and
    # a lower watermark sends the ids reused next to the tail instead of the trigger.
    db.execute(SET_WATERMARK_SQL, [top])
    return count


def queue_messages(db: Handle, chars: int, count: int) -> None:
    """After an append wrote messages (in its transaction): check the tail at the commit.

    Args:
        db: The handle (its transaction is open).
        chars: The length of the text the append wrote.
        count: How many messages it wrote.
    """
    if not db.dialect.capabilities.fts_bm25:
        return
    db.unindexed_bytes += chars
    db.unindexed_messages += count
    if not db.has_deferred(_QUEUED):
        db.defer(_QUEUED, lambda: _index_if_long(db))
    if not db.has_close_hook(_QUEUED):
        db.at_close(_QUEUED, lambda: index_at_close(db))


def _index_if_long(db: Handle) -> None:
    if db.unindexed_messages < TAIL_MESSAGES and db.unindexed_bytes < TAIL_BYTES:
        return  # (issue 17: no statement at a commit below the threshold)
    index_tail(db)  # (it reads the tail once, and does nothing when it is empty)


def ensure_indexed(db: Handle) -> None:
    """Before a search: index the tail, so the search sees every committed message.

    Inside a transaction the tail is indexed in it; otherwise in a short write
    transaction of its own, only when there is a tail. A read-only store cannot write:
    it searches the index as the last drain left it (docs/search.md).
    """
    if not db.dialect.capabilities.fts_bm25:
        return
    if db.in_transaction:
        db.flush_deferred()
        index_tail(db)
        return
    state = tail_state(db)
    if state is None or db.read_only or (state[1] is not None and state[0] <= state[1]):
        return
    with db.atomic():
        index_tail(db)


def index_at_close(db: Handle) -> None:
    """When a store that appended closes: index the tail if the write lock is free now.

    Never waits for another writer and never fails the close: a tail left behind is
    indexed by the next drain.
    """
    if db.read_only or db.in_transaction:
        return
    with contextlib.suppress(NexusError, sqlite3.Error):
        state = tail_state(db)
        if state is None or state[0] == state[1]:
            return
        timeout = db.execute("pragma busy_timeout").fetchone()[0]
        db.execute("pragma busy_timeout = 0")  # one try: a busy writer keeps its lock
        try:
            db.execute(db.dialect.begin_sql)
            try:
                index_tail(db)
                db.execute("commit")
            except BaseException:
                db.execute("rollback")
                raise
        finally:
            db.execute(f"pragma busy_timeout = {int(timeout)}")


def rebuild_message_index(db: Handle) -> None:
    """Rebuild ``messages_fts`` from every message and set the watermark to the last one.

    (In a transaction; `doctor --fix` uses it when the index disagrees with messages.)
    """
    db.execute("insert into messages_fts (messages_fts) values ('rebuild')")
    db.execute(_RESET_WATERMARK_SQL)
    db.unindexed_bytes = db.unindexed_messages = 0


class _Undo(Exception):
    """Rolls back the drain `check_message_index` did only to check."""


def check_message_index(db: Handle) -> str | None:
    """Whether ``messages_fts`` indexes exactly the messages up to its watermark.

    The tail is indexed and FTS5's integrity check compares the index with every
    message, inside a transaction that is then rolled back: the database is left as it
    was. (A read-only store is not checked: the check needs the write lock.)

    Returns:
        What FTS5 reports when the index disagrees with the messages, or None.
    """
    if not db.dialect.capabilities.fts_bm25 or db.read_only or not _watermarked(db):
        return None
    problem: str | None = None
    with contextlib.suppress(_Undo), db.atomic():
        try:
            index_tail(db)
            db.execute(_INTEGRITY_SQL)
        except (NexusError, sqlite3.DatabaseError) as err:
            problem = str(err)
        raise _Undo
    return problem


def index_file_tail(path: Path) -> bool:
    """Index the tail of a SQLite file if its write lock is free at once (for ``sql``).

    ``nexus-store sql`` reads through a read-only connection, which cannot index; it
    calls this first when its query names ``messages_fts``. A file it cannot write
    (permissions, an older schema without a watermark, a busy writer) is left as is.

    Returns:
        Whether the index now holds every message.
    """
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=0, isolation_level=None)
    except sqlite3.Error:
        return False
    compressed.register(conn)  # the index reads its text through messages_text (0065)
    try:
        top, mark = conn.execute(TAIL_STATE_SQL).fetchone()
        if mark is None:
            return False  # `doctor --fix` or the next store drain rebuilds it
        if top <= mark:
            return True
        conn.execute("begin immediate")
        try:
            top, mark = conn.execute(TAIL_STATE_SQL).fetchone()
            if mark is not None and top > mark:
                conn.execute(INDEX_TAIL_SQL, [mark, top])
                conn.execute(SET_WATERMARK_SQL, [top])
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()
