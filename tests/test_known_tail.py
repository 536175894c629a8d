"""A session's row as the handle's last commit wrote it is reused, never when stale (issue 17).

A transaction that ran only appends leaves the session rows it wrote on the handle
(`Handle.known_tail`); the next transaction uses them instead of reading the row again,
while no statement of the connection changed a row since (``total_changes``) and no
other connection committed (``PRAGMA data_version``). Anything else must make the next
append read the row: another store on the file, the raw connection, another part of the
same store, a rollback, a refused append. Each case is checked against what a fresh
store reads, and a hypothesis property mixes them against a reference model.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import InvalidEntry, Store


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def reads(store: Store) -> list[str]:
    """Start recording the session-row reads of ``store``'s connection."""
    seen: list[str] = []
    conn = store.conn
    assert isinstance(conn, sqlite3.Connection)
    conn.set_trace_callback(lambda sql: seen.append(sql) if "s.last_seq" in sql else None)
    return seen


def leaf_and_seq(path: Path, sid: str) -> tuple[str | None, int]:
    with Store(str(path)) as fresh:
        session = fresh.get_session(sid)
        return session.active_leaf, fresh.path(sid)[-1].seq if session.active_leaf else -1


def test_consecutive_commits_read_the_row_once(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        seen = reads(store)
        turns = [store.append_message(s.id, user(f"t{i}")) for i in range(5)]
        assert len(seen) == 1  # the first append reads; the next four know the row
        assert [t.seq for t in turns] == list(range(5))
        assert [t.parent_id for t in turns[1:]] == [t.id for t in turns[:-1]]
    assert leaf_and_seq(tmp_path / "s.db", s.id) == (turns[-1].id, 4)


def test_another_store_on_the_file_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    with Store(path) as a, Store(path) as b:
        s = a.create_session()
        a0 = a.append_message(s.id, user("a0"))
        a1 = a.append_message(s.id, user("a1"))  # known from a0's commit
        b2 = b.append_message(s.id, user("b2"))
        a3 = a.append_message(s.id, user("a3"))  # b committed: a reads the row again
        assert (a1.parent_id, b2.parent_id, a3.parent_id) == (a0.id, a1.id, b2.id)
        assert [a1.seq, b2.seq, a3.seq] == [1, 2, 3]
        b4 = b.append_message(s.id, user("b4"))
        assert (b4.parent_id, b4.seq) == (a3.id, 4)


def test_the_raw_connection_moving_the_leaf_is_seen(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        root = store.append_message(s.id, user("root"))
        store.append_message(s.id, user("child"))
        conn = store.conn
        conn.execute(
            "update sessions set active_leaf_id = (select id from turns where uid = ?) "
            "where uid = ?",
            [root.id, s.id],
        )
        conn.commit()
        side = store.append_message(s.id, user("side"))
        assert side.parent_id == root.id


def test_a_raw_write_in_autocommit_on_another_session_is_seen(tmp_path: Path) -> None:
    # total_changes moves even for a row of another table: the check is coarse on purpose
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        first = store.append_message(s.id, user("first"))
        store.conn.execute("update sessions set title = 'renamed' where uid = ?", [s.id])
        seen = reads(store)
        nxt = store.append_message(s.id, user("next"))
        assert len(seen) == 1 and nxt.parent_id == first.id


def test_navigation_by_the_store_is_seen(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        root = store.append_message(s.id, user("root"))
        store.append_message(s.id, user("child"))
        store.navigate(s.id, root.id)
        assert store.append_message(s.id, user("side")).parent_id == root.id
        store.navigate(s.id, None)
        assert store.append_message(s.id, user("new root")).parent_id is None


def test_navigation_inside_a_transaction_of_appends_is_seen(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        root = store.append_message(s.id, user("root"))
        with store.atomic():
            store.append_message(s.id, user("child"))
            store.navigate(s.id, root.id)  # the same transaction: not appends only
        assert store.append_message(s.id, user("side")).parent_id == root.id


def test_an_append_after_navigation_in_the_same_transaction_follows_it(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        root = store.append_message(s.id, user("root"))
        store.append_message(s.id, user("child"))
        with store.atomic():
            store.navigate(s.id, root.id)
            side = store.append_message(s.id, user("side"))
        assert side.parent_id == root.id


def test_a_rolled_back_transaction_is_seen(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        first = store.append_message(s.id, user("first"))
        with pytest.raises(RuntimeError), store.atomic():
            store.append_message(s.id, user("gone"))
            raise RuntimeError("roll back")
        nxt = store.append_message(s.id, user("next"))
        assert (nxt.parent_id, nxt.seq) == (first.id, 1)


def test_a_refused_append_is_seen(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        first = store.append_message(s.id, user("first"))
        with pytest.raises(InvalidEntry):
            store.append_entry(s.id, {"type": "message", "id": first.id, "message": user("dup")})
        nxt = store.append_message(s.id, user("next"))
        assert (nxt.parent_id, nxt.seq) == (first.id, 1)


def test_a_rolled_back_savepoint_keeps_nothing_it_wrote(tmp_path: Path) -> None:
    with Store(str(tmp_path / "s.db")) as store:
        s = store.create_session()
        kept = store.append_message(s.id, user("kept"))
        with store.atomic():
            store.append_message(s.id, user("a"))
            with pytest.raises(RuntimeError), store.atomic():
                store.append_message(s.id, user("undone"))
                store.get_session(s.id)  # writes the pending row inside the savepoint
                raise RuntimeError("undo the inner block")
        nxt = store.append_message(s.id, user("next"))
    assert nxt.seq == 2
    assert leaf_and_seq(tmp_path / "s.db", s.id) == (nxt.id, 2)
    assert kept.seq == 0


def test_a_session_deleted_by_another_connection_is_seen(tmp_path: Path) -> None:
    from nexus_store import SessionNotFound

    with Store(str(tmp_path / "s.db")) as store, Store(str(tmp_path / "s.db")) as other:
        s = store.create_session()
        store.append_message(s.id, user("first"))
        conn = other.conn
        key = conn.execute("select id from sessions where uid = ?", [s.id]).fetchone()[0]
        conn.execute("update sessions set active_leaf_id = null where id = ?", [key])
        turns = "select id from turns where session_id = ?"
        conn.execute(f"delete from messages where turn_id in ({turns})", [key])
        conn.execute("delete from turns where session_id = ?", [key])
        conn.execute("delete from sessions where id = ?", [key])
        conn.commit()
        with pytest.raises(SessionNotFound):
            store.append_message(s.id, user("next"))


OPS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "navigate", "raw", "rollback", "batch", "refused"]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_appends_follow_a_reference_model(
    tmp_path_factory: pytest.TempPathFactory, ops: Any
) -> None:
    """Two stores on one file and every way of moving a session; the model is a list."""
    path = str(tmp_path_factory.mktemp("known") / "s.db")
    with Store(path) as a, Store(path) as b:
        s = a.create_session()
        turns: list[str] = []  # uids in seq order
        parent: dict[str, str | None] = {}
        leaf: str | None = None
        for op, n in ops:
            if op in ("a", "b"):
                t = (a if op == "a" else b).append_message(s.id, user(f"{op}{n}"))
                assert (t.parent_id, t.seq) == (leaf, len(turns))
                turns.append(t.id)
                parent[t.id] = leaf
                leaf = t.id
            elif op == "navigate" and turns:
                leaf = turns[n % len(turns)]
                (b if n % 2 else a).navigate(s.id, leaf)
            elif op == "raw" and turns:
                leaf = turns[n % len(turns)]
                conn = a.conn
                conn.execute(
                    "update sessions set active_leaf_id = (select id from turns where uid = ?) "
                    "where uid = ?",
                    [leaf, s.id],
                )
                conn.commit()
            elif op == "rollback":
                with pytest.raises(RuntimeError), a.atomic():
                    a.append_message(s.id, user("gone"))
                    raise RuntimeError("roll back")
            elif op == "batch":
                with a.atomic():
                    for i in range(n % 4 + 1):
                        t = a.append_message(s.id, user(f"batch{i}"))
                        assert (t.parent_id, t.seq) == (leaf, len(turns))
                        turns.append(t.id)
                        parent[t.id] = leaf
                        leaf = t.id
            elif op == "refused" and turns:
                with pytest.raises(InvalidEntry):
                    a.append_entry(s.id, {"type": "message", "id": turns[0], "message": user("x")})
        with Store(path) as fresh:
            assert fresh.get_session(s.id).active_leaf == leaf
            assert [t.id for t in fresh.path(s.id)] == _path(parent, leaf)


def _path(parent: dict[str, str | None], leaf: str | None) -> list[str]:
    out: list[str] = []
    while leaf is not None:
        out.append(leaf)
        leaf = parent[leaf]
    return out[::-1]


def test_a_commit_right_after_ours_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another connection commits between our commit and anything we read after it: the
    # mark must come from inside our transaction, or it would hide that commit.
    from nexus_store.store import db as db_module

    path = str(tmp_path / "s.db")
    with Store(path) as a, Store(path) as b:
        s = a.create_session()
        run = db_module.Handle._run
        injected: list[str] = []

        def run_then_b(self: Any, sql: str, params: Any = ()) -> Any:
            result = run(self, sql, params)
            if sql == "commit" and self is a.handle and not injected:
                injected.append(b.append_message(s.id, user("b, just after")).id)
            return result

        monkeypatch.setattr(db_module.Handle, "_run", run_then_b)
        first = a.append_message(s.id, user("a, first"))
        monkeypatch.setattr(db_module.Handle, "_run", run)
        nxt = a.append_message(s.id, user("a, next"))
        assert injected and (nxt.parent_id, nxt.seq) == (injected[0], 2)
        assert first.seq == 0
