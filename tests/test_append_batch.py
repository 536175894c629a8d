"""Appends inside a caller's transaction: one session-row read and update per transaction.

The appends of a transaction keep the session's new state (last seq, active leaf) on
the handle and write the row once. Every other reader or writer in the transaction
(another part, the raw connection, a nested block) must still see the row as if it had
been updated per append, a rollback (whole or to a savepoint) must undo exactly what it
undoes, and a refused append must leave nothing behind.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import InvalidEntry, Store
from nexus_store.store.indexqueue import check_message_index


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def row(store: Store, sid: str) -> tuple[int, str | None]:
    """(last_seq, active leaf uid) as stored in the session's row."""
    got = store.conn.execute(
        "select s.last_seq, t.uid from sessions s left join turns t on t.id = s.active_leaf_id "
        "where s.uid = ?",
        [sid],
    ).fetchone()
    return int(got[0]), got[1]


def statements(store: Store) -> list[str]:
    seen: list[str] = []
    conn = store.conn
    assert isinstance(conn, sqlite3.Connection)
    last: list[str] = [""]

    def trace(sql: str) -> None:
        # SQLite traces a statement again as each trigger subprogram starts (the
        # message index's insert trigger, whose WHEN skips the tail): count it once
        if sql != last[0] or not sql.startswith("insert into"):
            seen.append(sql)
        if not sql.startswith("--"):  # (FTS5's own statements, traced between)
            last[0] = sql

    conn.set_trace_callback(trace)
    return seen


def test_a_batch_reads_and_updates_the_session_row_once(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, user("first"))
    seen = statements(store)
    with store.atomic():
        for i in range(20):
            store.append_message(s.id, user(f"turn {i}"))
    store.conn.set_trace_callback(None)
    updates = [q for q in seen if q.startswith("update sessions set active_leaf_id")]
    reads = [q for q in seen if q.startswith("select s.id, s.last_seq")]
    checks = [q for q in seen if q == "pragma data_version"]
    assert len(updates) == 1
    # the row as the last commit ("first") wrote it is known: one check, no read
    # (tests/test_known_tail.py)
    assert (len(reads), len(checks)) == (0, 1)
    assert row(store, s.id)[0] == 20
    assert [t.seq for t in store.path(s.id)] == list(range(21))


def test_every_reader_in_the_transaction_sees_the_new_leaf(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        turns = [store.append_message(s.id, user(f"t{i}")) for i in range(3)]
        assert row(store, s.id) == (2, turns[-1].id)  # the raw connection
        assert store.get_session(s.id).active_leaf == turns[-1].id  # another part
        assert [t.id for t in store.path(s.id)] == [t.id for t in turns]
        more = store.append_message(s.id, user("after a read"))
        assert more.parent_id == turns[-1].id and more.seq == 3
    assert store.get_session(s.id).active_leaf == more.id


def test_explicit_parent_and_other_sessions_in_one_batch(store: Store) -> None:
    a, b = store.create_session(), store.create_session()
    with store.atomic():
        a0 = store.append_message(a.id, user("a0"))
        b0 = store.append_message(b.id, user("b0"))
        a1 = store.append_message(a.id, user("a1"), parent_id=a0.id)  # the cached leaf
        a_side = store.append_message(a.id, user("a side"), parent_id=a0.id)  # a branch
        a2 = store.append_message(a.id, user("a2"))
        root = store.append_message(b.id, user("b root"), parent_id=None)
    assert a1.parent_id == a0.id and a_side.parent_id == a0.id and a2.parent_id == a_side.id
    assert [t.seq for t in (a0, a1, a_side, a2)] == [0, 1, 2, 3]
    assert root.parent_id is None and root.seq == 1 and b0.seq == 0
    assert row(store, a.id) == (3, a2.id)
    assert row(store, b.id) == (1, root.id)
    assert store.doctor().ok


def test_rollback_to_a_savepoint_keeps_the_appends_before_it(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        kept = store.append_message(s.id, user("kept"))
        with pytest.raises(RuntimeError), store.atomic():
            store.append_message(s.id, user("undone"))
            raise RuntimeError("undo the inner block")
        after = store.append_message(s.id, user("after"))
    assert after.parent_id == kept.id and after.seq == 1
    assert row(store, s.id) == (1, after.id)
    assert [t.id for t in store.path(s.id)] == [kept.id, after.id]


def test_a_whole_rollback_writes_no_session_row(store: Store) -> None:
    s = store.create_session()
    first = store.append_message(s.id, user("first"))
    with pytest.raises(RuntimeError), store.atomic():
        store.append_message(s.id, user("gone"))
        raise RuntimeError("roll back")
    assert row(store, s.id) == (0, first.id)
    nxt = store.append_message(s.id, user("next"))
    assert nxt.seq == 1 and nxt.parent_id == first.id


def test_a_refused_append_in_a_batch_leaves_the_session_as_it_was(store: Store) -> None:
    s = store.create_session()
    with store.atomic():
        a = store.append_message(s.id, user("a"))
        with pytest.raises(InvalidEntry):
            store.append_entry(s.id, {"type": "message", "id": a.id, "message": user("dup")})
        with pytest.raises(InvalidEntry):
            store.append_compaction(s.id, "sum", "no-such-turn", 10)
        b = store.append_message(s.id, user("b"))
    assert b.parent_id == a.id and b.seq == 1
    assert row(store, s.id) == (1, b.id)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["append", "branch", "root", "read", "fail", "dup", "nested_fail"]),
            st.integers(0, 30),
        ),
        max_size=25,
    )
)
def test_batched_appends_match_appends_committed_one_by_one(ops: list[tuple[str, int]]) -> None:
    """The same operations, batched in one transaction or each committed alone, agree."""

    def run(batched: bool) -> list[tuple[int, str | None, int]]:
        store = Store(memory=True, counter="chars4")
        sid = store.create_session().id
        ids: list[str] = []

        def step(op: str, n: int) -> None:
            if op == "append" or (op == "branch" and not ids):
                ids.append(store.append_message(sid, user(f"m{n}")).id)
            elif op == "branch":
                ids.append(store.append_message(sid, user(f"b{n}"), parent_id=ids[n % len(ids)]).id)
            elif op == "root":
                ids.append(store.append_message(sid, user(f"r{n}"), parent_id=None).id)
            elif op == "read":
                store.get_session(sid)
            elif op == "dup" and ids:
                dup = {"type": "message", "id": ids[n % len(ids)], "message": user("dup")}
                with pytest.raises(InvalidEntry):
                    store.append_entry(sid, dup)
            elif op in ("fail", "dup"):
                with pytest.raises(InvalidEntry):
                    store.append_entry(sid, {"type": "message", "message": {"content": 1}})
            else:
                with pytest.raises(RuntimeError), store.atomic():
                    store.append_message(sid, user("undone"))
                    raise RuntimeError

        if batched:
            with store.atomic():
                for op, n in ops:
                    step(op, n)
        else:
            for op, n in ops:
                step(op, n)
        assert store.doctor().ok
        session = store.get_session(sid)
        out = [(t.seq, t.parent_id, t.depth) for t in store.iter_turns(sid)]
        out.append((row(store, sid)[0], session.active_leaf, -1))
        store.close()
        return [(seq, None if p is None else str(ids.index(p)), d) for seq, p, d in out]

    assert run(True) == run(False)


def fts_ok(store: Store) -> None:
    """FTS5's own check that the index matches its content table exactly."""
    assert check_message_index(store.handle) is None


class Boom(Exception):
    """The failure a test injects."""


def fail_on(monkeypatch: pytest.MonkeyPatch, store: Store, prefix: str, *, after: bool) -> None:
    """Make the handle's next statement starting with ``prefix`` fail (before or after it ran)."""
    handle = store.handle
    real = type(handle).execute

    def execute(self: Any, sql: str, params: Any = ()) -> Any:
        if sql.startswith(prefix):
            monkeypatch.setattr(type(handle), "execute", real)  # once
            if after:
                real(self, sql, params)
                raise KeyboardInterrupt  # the statement ran; the interrupt came after
            raise Boom(sql[:30])
        return real(self, sql, params)

    monkeypatch.setattr(type(handle), "execute", execute)


def test_no_savepoint_per_append_inside_a_transaction(store: Store) -> None:
    s = store.create_session()
    seen = statements(store)
    with store.atomic():
        for i in range(5):
            store.append_messages(s.id, [user(f"q{i}"), user(f"more{i}")])
    store.conn.set_trace_callback(None)
    assert not [q for q in seen if q.startswith("savepoint")]
    assert len([q for q in seen if q.startswith("insert into messages (")]) == 5  # one per turn


def test_a_failed_message_insert_in_a_batch_leaves_no_turn(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.create_session()
    with store.atomic():
        a = store.append_message(s.id, user("walrus a"))
        fail_on(monkeypatch, store, "insert into messages (", after=False)
        with pytest.raises(Boom):
            store.append_messages(s.id, [user("walrus lost"), user("walrus lost too")])
        assert row(store, s.id) == (0, a.id)
        b = store.append_message(s.id, user("walrus b"))
    assert b.parent_id == a.id and b.seq == 1
    assert [t.id for t in store.iter_turns(s.id)] == [a.id, b.id]
    assert store.conn.execute("select count(*) from messages").fetchone()[0] == 2
    assert len(store.search("walrus", limit=10)) == 2
    fts_ok(store)
    assert store.doctor().ok


def test_an_interrupt_after_the_last_statement_keeps_the_whole_append(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.create_session()
    with store.atomic():
        a = store.append_message(s.id, user("walrus a"))
        fail_on(monkeypatch, store, "insert into messages (", after=True)
        with pytest.raises(KeyboardInterrupt):
            store.append_messages(s.id, [user("walrus kept"), user("walrus kept too")])
        b = store.append_message(s.id, user("walrus b"))
    turns = list(store.iter_turns(s.id))
    assert [t.seq for t in turns] == [0, 1, 2]
    assert turns[1].parent_id == a.id and b.parent_id == turns[1].id
    assert len(store.search("walrus", limit=10)) == 4
    fts_ok(store)
    assert store.doctor().ok


def test_a_failed_turn_insert_in_a_batch_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.create_session()
    with store.atomic():
        a = store.append_message(s.id, user("a"))
        fail_on(monkeypatch, store, "insert into turns", after=False)
        with pytest.raises(Boom):
            store.append_message(s.id, user("lost"))
        b = store.append_message(s.id, user("b"))
    assert [t.id for t in store.iter_turns(s.id)] == [a.id, b.id]
    assert store.doctor().ok
