"""Messages are indexed for search in bulk, up to a watermark (store/indexqueue.py).

Search through the store stays exact: after every commit, inside a transaction, after a
rollback (whole or to a savepoint), beside other writers in the same transaction, and
for a reader in another connection. The index holds exactly the messages at or below the
watermark whatever writes the table (`check_message_index`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import InvalidEntry, Store, migrate
from nexus_store.store import indexqueue
from nexus_store.store.indexqueue import TAIL_MESSAGES, check_message_index
from nexus_store.store.readonly import run_readonly

try:
    from tests.old_schema import copy_to_old_schema
except ImportError:  # tests/ itself on sys.path
    from old_schema import copy_to_old_schema  # type: ignore[no-redef]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def fts_ok(store: Store) -> None:
    """The index holds exactly the messages up to the watermark (FTS5's own check)."""
    assert check_message_index(store.handle) is None


def state(conn: Any) -> tuple[int, int]:
    """(largest message key, watermark)."""
    row = conn.execute(indexqueue.TAIL_STATE_SQL).fetchone()
    return int(row[0]), int(row[1])


def indexed(conn: Any, word: str) -> int:
    """Rows the index itself finds (no drain first)."""
    sql = "select count(*) from messages_fts where messages_fts match ?"
    return int(conn.execute(sql, [word]).fetchone()[0])


def hits(store: Store, word: str) -> int:
    return len(store.search(word, limit=1000))


def test_a_single_commit_writes_no_index_rows_and_search_finds_it(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("walrus one"))
    top, mark = state(store.conn)
    assert top > mark  # in the tail: the commit wrote no segment
    assert indexed(store.conn, "walrus") == 0
    assert hits(store, "walrus") == 1  # the search indexed the tail first
    assert state(store.conn) == (top, top)
    assert indexed(store.conn, "walrus") == 1
    fts_ok(store)


def test_a_long_tail_is_indexed_at_the_commit_that_makes_it(store: Store) -> None:
    s = store.create_session()
    for i in range(TAIL_MESSAGES - 1):
        store.append_message(s.id, user(f"walrus n{i}"))
    top, mark = state(store.conn)
    assert top - mark == TAIL_MESSAGES - 1
    store.append_message(s.id, user("walrus last"))
    top, mark = state(store.conn)
    assert top == mark
    assert indexed(store.conn, "walrus") == TAIL_MESSAGES
    fts_ok(store)


def test_much_text_is_indexed_before_the_count_is_reached(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("walrus " + "x " * (indexqueue.TAIL_BYTES // 2)))
    top, mark = state(store.conn)
    assert top == mark
    assert indexed(store.conn, "walrus") == 1


def test_a_batch_is_searchable_after_commit(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        for i in range(30):
            store.append_message(s.id, user(f"walrus number{i}"))
    assert hits(store, "walrus") == 30
    fts_ok(store)
    store.append_message(s.id, user("walrus alone"))
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


def test_rollback_leaves_the_index_and_the_watermark_as_they_were(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("kept walrus"))
    before = state(store.conn)
    with pytest.raises(RuntimeError), store.atomic():
        store.append_message(s.id, user("lost walrus"))
        assert hits(store, "walrus") == 2  # drained inside the transaction...
        raise RuntimeError("boom")
    assert state(store.conn) == before  # ...and undone with it
    assert hits(store, "walrus") == 1
    fts_ok(store)
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


def test_rollback_to_a_savepoint_after_a_drain(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.conn.execute("savepoint outer_sp")
        store.append_message(s.id, user("ibis undone"))
        assert hits(store, "ibis") == 1  # drained inside the savepoint
        store.conn.execute("rollback to savepoint outer_sp")
        store.conn.execute("release savepoint outer_sp")
        store.append_message(s.id, user("ibis kept"))
    assert hits(store, "ibis") == 1
    fts_ok(store)


def test_other_writes_in_the_transaction_see_an_exact_index(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        store.append_message(s.id, user("tapir one"))
        t = store.create_session()
        store.append_message(t.id, user("tapir two"))
    assert hits(store, "tapir") == 2
    fts_ok(store)


def test_another_connection_searches_what_one_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(str(path), counter="chars4") as writer, Store(str(path)) as reader:
        s = writer.create_session()
        for i in range(6):
            writer.append_message(s.id, user(f"quokka {i}"))
            if i % 2:
                writer.append_message(s.id, user("quokka again"))
            expected = i + 1 + (i + 1) // 2
            assert hits(reader, "quokka") == expected  # the reader drains the writer's tail
            assert hits(writer, "quokka") == expected
        fts_ok(writer)


def test_a_reader_does_not_see_an_uncommitted_append(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(str(path), counter="chars4") as store:
        s = store.create_session()
        reader = sqlite3.connect(path)
        with store.atomic():
            store.append_message(s.id, user("quokka"))
            assert hits(store, "quokka") == 1
            assert indexed(reader, "quokka") == 0
        assert indexed(reader, "quokka") == 1  # the drain committed with the append
        reader.close()


def test_closing_a_store_that_appended_indexes_its_tail(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(str(path), counter="chars4") as store:
        s = store.create_session()
        store.append_message(s.id, user("dugong"))
        assert indexed(store.conn, "dugong") == 0
    conn = sqlite3.connect(path)
    assert indexed(conn, "dugong") == 1
    top, mark = state(conn)
    assert top == mark
    conn.close()


def test_closing_does_not_wait_for_a_busy_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(str(path), counter="chars4", busy_timeout=30)
    s = store.create_session()
    store.append_message(s.id, user("dugong"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("begin immediate")  # another process holds the write lock
    store.close()  # returns at once; the tail waits for the next drain
    other.execute("rollback")
    other.close()
    with Store(str(path)) as again:
        assert state(again.conn)[0] > state(again.conn)[1]
        assert hits(again, "dugong") == 1
        fts_ok(again)


def test_a_killed_writer_loses_nothing_and_search_stays_exact(tmp_path: Path) -> None:
    """The tail of a process that never drained (killed after its commits) is indexed later."""
    path = tmp_path / "s.db"
    store = Store(str(path), counter="chars4")
    s = store.create_session()
    for i in range(10):
        store.append_message(s.id, user(f"manatee {i}"))
    # a kill: the connection goes without the store's close (no drain at close)
    store.handle._at_close.clear()
    store.close()
    conn = sqlite3.connect(path)
    top, mark = state(conn)
    assert top - mark == 10
    assert indexed(conn, "manatee") == 0
    conn.close()
    with Store(str(path)) as again:
        assert hits(again, "manatee") == 10
        fts_ok(again)


def test_a_crash_during_the_drain_leaves_the_tail_above_the_watermark(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.create_session()
    store.append_message(s.id, user("dugong"))
    before = state(store.conn)
    real = indexqueue.Handle.execute

    def execute(self: Any, sql: str, params: Any = ()) -> Any:
        if sql.startswith("update search_watermark"):
            raise KeyboardInterrupt  # after the index rows, before the watermark
        return real(self, sql, params)

    monkeypatch.setattr(indexqueue.Handle, "execute", execute)
    with pytest.raises(KeyboardInterrupt):
        store.search("dugong")
    monkeypatch.undo()
    assert state(store.conn) == before  # the half drain was rolled back
    assert hits(store, "dugong") == 1
    fts_ok(store)


def test_a_reused_id_is_indexed_at_once(store: Store) -> None:
    s = store.create_session()
    for word in ("alpha", "beta", "gamma"):
        store.append_message(s.id, user(word))
    assert hits(store, "gamma") == 1  # all three indexed
    top, mark = state(store.conn)
    assert top == mark
    # the top row goes, and an outside writer takes its id again
    turn_id = store.conn.execute("select turn_id from messages where id = ?", [top]).fetchone()[0]
    store.conn.execute("delete from messages where id = ?", [top])
    store.conn.execute(
        "insert into messages (id, turn_id, idx, text, tokens) values (?, ?, 0, 'delta', 1)",
        [top, turn_id],
    )
    store.conn.commit()
    assert indexed(store.conn, "delta") == 1  # by the trigger: it is at the watermark
    assert indexed(store.conn, "gamma") == 0
    assert hits(store, "delta") == 1 and hits(store, "gamma") == 0
    fts_ok(store)


def test_outside_writers_join_the_tail(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("first"))
    assert hits(store, "first") == 1
    turn_id = store.conn.execute("select max(turn_id) from messages").fetchone()[0]
    # sqlite-utils / Datasette style: plain SQL inserts, updates and deletes
    store.conn.execute(
        "insert into messages (turn_id, idx, text, tokens) values (?, 1, 'outsider', 1)", [turn_id]
    )
    store.conn.execute(
        "insert into messages (turn_id, idx, text, tokens) values (?, 2, 'gone soon', 1)",
        [turn_id],
    )
    store.conn.execute("update messages set text = 'changed first' where text = 'first'")
    store.conn.execute("update messages set text = 'changed outsider' where text = 'outsider'")
    store.conn.execute("delete from messages where text = 'gone soon'")
    store.conn.commit()
    assert hits(store, "outsider") == 1
    assert hits(store, "changed") == 2
    assert hits(store, "first") == 1
    assert hits(store, "soon") == 0
    fts_ok(store)


def test_a_missing_watermark_row_rebuilds_the_index(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("walrus"))
    assert hits(store, "walrus") == 1
    store.append_message(s.id, user("walrus two"))
    store.conn.execute("delete from search_watermark")
    store.conn.commit()
    assert hits(store, "walrus") == 2
    fts_ok(store)


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
        fts_ok(store)


def test_migrating_an_existing_store_starts_the_watermark_at_its_last_message(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    today = store_path.with_name("today.db")
    with Store(today, counter="chars4") as old:
        s = old.create_session(id="old").id
        for i in range(5):
            old.append_message(s, user(f"yak {i}"))
        last = old.conn.execute("select max(id) from messages").fetchone()[0]
    # the rows as a store of schema 0050 holds them (today's code writes 0065's columns)
    copy_to_old_schema(today, store_path, "0050_reference_indexes", monkeypatch)
    with Store(store_path) as new:
        assert "0060_search_watermark" in migrate.applied(new.db)
        assert state(new.conn) == (last, last)
        assert indexed(new.conn, "yak") == 5
        new.append_message("old", user("and a new yak"))
        assert state(new.conn) == (last + 1, last)  # the new one is in the tail
        assert hits(new, "yak") == 6
        fts_ok(new)


def test_sql_indexes_the_tail_before_a_query_on_the_index(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(str(path), counter="chars4")
    s = store.create_session()
    store.append_message(s.id, user("pangolin"))
    query = "select count(*) from messages_fts where messages_fts match 'pangolin'"
    # while another process holds the write lock, sql does not wait: the index lags
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("begin immediate")
    _, rows = run_readonly(path, query)
    assert list(rows) == [(0,)]
    other.execute("rollback")
    other.close()
    _, rows = run_readonly(path, query)
    assert list(rows) == [(1,)]
    assert state(store.conn)[0] == state(store.conn)[1]
    # a query that does not name the index writes nothing
    store.append_message(s.id, user("pangolin two"))
    before = state(store.conn)
    _, rows = run_readonly(path, "select count(*) from messages")
    assert list(rows) == [(2,)]
    assert state(store.conn) == before
    store.close()


def test_doctor_finds_a_doubly_indexed_tail_and_rebuilds(store: Store) -> None:
    s = store.create_session()
    for word in ("alpha", "beta"):
        store.append_message(s.id, user(word))
    assert hits(store, "beta") == 1
    assert store.doctor().ok
    # someone rebuilt the index by hand without moving the watermark
    store.conn.execute("update search_watermark set messages_indexed_to = 0")
    store.conn.commit()
    report = store.doctor()
    assert [f.check for f in report.findings] == ["search_index"]
    fixed = store.doctor(fix=True)
    assert fixed.ok and "rebuilt the message search index" in fixed.actions
    assert store.doctor().ok
    assert hits(store, "alpha") == 1 and hits(store, "beta") == 1
    fts_ok(store)


def test_a_read_only_store_searches_the_index_as_it_stands(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("kinkajou one"))
    assert hits(store, "kinkajou") == 1
    store.append_message(s.id, user("kinkajou two"))
    store.handle.read_only = "a read-only file (test)"  # as a file it cannot write
    assert hits(store, "kinkajou") == 1  # the tail is not indexed, and nothing fails
    assert check_message_index(store.handle) is None  # (not checked: needs the lock)
    store.handle.read_only = None
    assert hits(store, "kinkajou") == 2
