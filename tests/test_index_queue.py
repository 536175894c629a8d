"""Appends inside a caller's transaction are indexed for search once, at its commit.

Search stays exact: after every commit, inside the transaction itself, after a rollback
(whole or to a savepoint), beside other writers in the same transaction, and for a
reader in another connection, which sees the trigger and the index only as committed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import InvalidEntry, Store
from nexus_store.store.indexqueue import MESSAGE_TRIGGER


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def fts_ok(store: Store) -> None:
    """FTS5's own check that the index matches its content table exactly."""
    store.conn.execute(
        "insert into messages_fts (messages_fts, rank) values ('integrity-check', 1)"
    )


def trigger(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "select 1 from sqlite_master where type = 'trigger' and name = ?", [MESSAGE_TRIGGER]
    ).fetchone()
    return row is not None


def hits(store: Store, word: str) -> int:
    return len(store.search(word, limit=100))


def test_a_batch_is_searchable_after_commit_and_keeps_the_trigger(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        for i in range(30):
            store.append_message(s.id, user(f"walrus number{i}"))
        assert not trigger(store.conn)  # paused for the transaction
    assert trigger(store.conn)
    assert hits(store, "walrus") == 30
    fts_ok(store)
    store.append_message(s.id, user("walrus alone"))  # the trigger indexes it
    assert hits(store, "walrus") == 31
    fts_ok(store)


def test_search_inside_the_transaction_sees_its_appends(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.append_message(s.id, user("narwhal one"))
        assert hits(store, "narwhal") == 1
        store.append_message(s.id, user("narwhal two"))
        assert hits(store, "narwhal") == 2
    assert hits(store, "narwhal") == 2
    fts_ok(store)


def test_rollback_leaves_the_index_and_the_trigger_as_they_were(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("kept walrus"))
    with pytest.raises(RuntimeError), store.atomic():
        store.append_message(s.id, user("lost walrus"))
        raise RuntimeError("boom")
    assert trigger(store.conn)
    assert hits(store, "walrus") == 1
    fts_ok(store)
    # the next transaction pauses and indexes afresh
    with store.atomic():
        store.append_message(s.id, user("new walrus"))
    assert hits(store, "walrus") == 2
    fts_ok(store)


def test_a_refused_append_in_a_batch_loses_nothing_indexed(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.append_message(s.id, user("okapi a"))
        with pytest.raises(InvalidEntry):
            store.append_entry(s.id, {"type": "message", "message": user("okapi dup"), "id": "x"})
            store.append_entry(s.id, {"type": "message", "message": user("okapi dup"), "id": "x"})
        store.append_message(s.id, user("okapi b"))
    assert hits(store, "okapi") == 3
    fts_ok(store)


def test_rollback_to_a_savepoint_that_undid_the_pause(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.conn.execute("savepoint outer_sp")
        store.append_message(s.id, user("ibis undone"))  # pauses inside the savepoint
        store.conn.execute("rollback to savepoint outer_sp")
        store.conn.execute("release savepoint outer_sp")
        assert trigger(store.conn)  # the rollback restored it
        store.append_message(s.id, user("ibis kept"))  # indexed by the trigger
    assert trigger(store.conn)
    assert hits(store, "ibis") == 1
    fts_ok(store)


def test_other_writes_in_the_transaction_see_an_exact_index(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.append_message(s.id, user("tapir one"))
        t = store.create_session()  # another part's write: the index is flushed first
        store.append_message(t.id, user("tapir two"))
    assert hits(store, "tapir") == 2
    fts_ok(store)


def test_another_connection_sees_only_committed_state(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(str(path), counter="chars4") as store:
        s = store.create_session()
        reader = sqlite3.connect(path)
        with store.atomic():
            store.append_message(s.id, user("quokka"))
            assert trigger(reader)  # the drop is not visible outside
            assert reader.execute(
                "select count(*) from messages_fts where messages_fts match 'quokka'"
            ).fetchone() == (0,)
        assert reader.execute(
            "select count(*) from messages_fts where messages_fts match 'quokka'"
        ).fetchone() == (1,)
        reader.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.sampled_from(["commit", "rollback", "single"]), st.integers(0, 4)),
        max_size=8,
    )
)
def test_search_counts_match_a_reference(ops: list[tuple[str, int]]) -> None:
    with Store(memory=True, counter="chars4") as store:
        s = store.create_session()
        expected = 0
        for how, n in ops:
            if how == "single":
                store.append_message(s.id, user("heron"))
                expected += 1
                continue
            try:
                with store.atomic():
                    for _ in range(n):
                        store.append_message(s.id, user("heron"))
                    assert hits(store, "heron") == expected + n
                    if how == "rollback":
                        raise KeyError
            except KeyError:
                continue
            expected += n
        assert hits(store, "heron") == expected
        assert trigger(store.conn)
        fts_ok(store)
