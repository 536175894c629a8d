"""Search through the store is exact after every commit, whoever wrote the messages.

A property test (hypothesis) against a brute-force reference: random single-commit
appends, batches, gc of whole sessions, and inserts, updates and deletes of message rows
by another sqlite3 connection (as sqlite-utils or Datasette would write), with searches
in between, from the writing store and from a second store on the same file. After each
step the hits equal the messages whose text holds the word, and at the end FTS5's own
check finds the index equal to the messages up to its watermark. The bulk-indexing
threshold is drawn too, so drains at commit, at search and at close all happen.
"""

from __future__ import annotations

import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.store import compressed, indexqueue

WORDS = ["otter", "heron", "lynx", "ibis", "tapir"]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
steps = st.one_of(
    st.tuples(st.just("append"), texts),
    st.tuples(st.just("batch"), st.lists(texts, min_size=1, max_size=5)),
    st.tuples(st.just("new_session"), texts),
    st.tuples(st.just("gc"), st.integers(0, 10)),
    st.tuples(st.just("outside_insert"), texts),
    st.tuples(st.just("outside_update"), st.tuples(st.integers(0, 50), texts)),
    st.tuples(st.just("outside_delete"), st.integers(0, 50)),
    st.tuples(st.just("outside_delete_top"), st.just("")),
    st.tuples(st.just("reopen"), st.booleans()),
)


def expected_hits(conn: sqlite3.Connection, word: str) -> list[tuple[str, str, int]]:
    rows = conn.execute(
        "select s.uid, t.uid, m.idx, m.text from messages m "
        "join turns t on t.id = m.turn_id join sessions s on s.id = t.session_id"
    ).fetchall()
    return sorted((s, t, i) for s, t, i, text in rows if word in (text or "").split())


def store_hits(store: Store, word: str) -> list[tuple[str, str, int]]:
    hits = store.search(word, limit=10_000)
    return sorted((h.session_id, h.turn_id, int(h.message_index or 0)) for h in hits)


def ranks(conn: Any, word: str) -> list[tuple[int, float]]:
    """(message key, BM25 rank rounded) of every row the index matches, read directly."""
    if isinstance(conn, Store):
        conn.search(word)  # indexes the tail
        conn = conn.conn
    rows = conn.execute(
        "select rowid, rank from messages_fts where messages_fts match ? order by rowid", [word]
    ).fetchall()
    return [(int(r), round(float(k), 9)) for r, k in rows]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


@settings(max_examples=30, deadline=None)
@given(
    st.lists(steps, min_size=1, max_size=25),
    st.sampled_from([1, 3, 256]),
    st.sampled_from(WORDS),
)
def test_search_equals_brute_force_after_every_step(
    ops: list[tuple[str, Any]], threshold: int, probe: str
) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexqueue, "TAIL_MESSAGES", threshold)
        path = Path(folder) / "s.db"
        store = Store(path, counter="chars4")
        reader = Store(path)
        outside = sqlite3.connect(path, isolation_level=None)
        # as sqlite-utils' and Datasette's connections get them from nexus_store's plugins:
        # the triggers read the text through messages_text (schema 0065)
        compressed.register(outside)
        sessions = [store.create_session().id]
        extra_idx = 1000
        try:
            for i, (op, arg) in enumerate(ops):
                if op == "append":
                    store.append_message(sessions[-1], user(arg))
                elif op == "batch":
                    with store.atomic():
                        for text in arg:
                            store.append_message(sessions[-1], user(text))
                elif op == "new_session":
                    sessions.append(store.create_session().id)
                    store.append_message(sessions[-1], user(arg))
                elif op == "gc" and len(sessions) > 1:
                    victim = sessions.pop(arg % (len(sessions) - 1))
                    future = datetime.now(UTC) + timedelta(days=10)
                    store.gc(victim, sessions_older_than=1, now=future, vacuum=arg == 0)
                elif op == "outside_insert":
                    turn = outside.execute("select max(id) from turns").fetchone()[0]
                    if turn is not None:
                        extra_idx += 1
                        outside.execute(
                            "insert into messages (turn_id, idx, text, tokens) values (?, ?, ?, 1)",
                            [turn, extra_idx, arg],
                        )
                elif op == "outside_update":
                    n, text = arg
                    outside.execute(
                        "update messages set text = ? where id = "
                        "(select id from messages order by id limit 1 offset "
                        "? % max(1, (select count(*) from messages)))",
                        [text, n],
                    )
                elif op == "outside_delete":
                    outside.execute(
                        "delete from messages where id = (select id from messages order by id "
                        "limit 1 offset ? % max(1, (select count(*) from messages)))",
                        [arg],
                    )
                elif op == "outside_delete_top":
                    outside.execute(
                        "delete from messages where id = (select max(id) from messages)"
                    )
                elif op == "reopen":
                    # the writer goes (killed: no drain at close, or closed) and comes back
                    if arg:
                        store.handle._at_close.clear()
                    store.close()
                    store = Store(path)
                word = WORDS[i % len(WORDS)] if i % 2 else probe
                expected = expected_hits(outside, word)
                searcher = reader if i % 3 == 0 else store
                assert store_hits(searcher, word) == expected, (op, word)
            assert indexqueue.check_message_index(store.handle) is None
            # the ranks too equal those of an index rebuilt from scratch (BM25 reads the
            # index's totals, which a wrong delete or a double insert would skew)
            ranked = {w: ranks(store, w) for w in WORDS}
            outside.execute("begin immediate")
            outside.execute("insert into messages_fts (messages_fts) values ('rebuild')")
            rebuilt = {w: ranks(outside, w) for w in WORDS}
            outside.execute("rollback")
            assert ranked == rebuilt
            # (outside rows carry made-up token counts: only the index is doctor's concern here)
            assert not [f for f in store.doctor().findings if f.check == "search_index"]
        finally:
            outside.close()
            reader.close()
            store.close()
