"""Store behaviour: sessions, appends, the active leaf, branches, labels, paths."""

from __future__ import annotations

import pytest

from nexus_store import (
    InvalidEntry,
    SessionNotFound,
    Store,
    TurnNotFound,
)


def user(text: str, ts: int = 0) -> dict[str, object]:
    return {"role": "user", "content": text, "timestamp": ts}


def assistant(text: str, model: str = "m1") -> dict[str, object]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "prov",
        "model": model,
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
        "stopReason": "stop",
        "timestamp": 1,
    }


class TestSessions:
    def test_create_get_list(self, store: Store) -> None:
        a = store.create_session(cwd="/a", title="first")
        b = store.create_session(id="fixed-id")
        assert store.get_session(a.id).cwd == "/a"
        assert store.get_session("fixed-id").id == b.id
        assert {s.id for s in store.list_sessions()} == {a.id, "fixed-id"}
        assert store.find_session("nope") is None

    def test_duplicate_session_id_is_refused(self, store: Store) -> None:
        store.create_session(id="x")
        with pytest.raises(InvalidEntry, match="already exists"):
            store.create_session(id="x")

    def test_resolve_by_prefix_and_latest(self, store: Store) -> None:
        store.create_session(id="abc-1")
        store.create_session(id="abd-2")
        assert store.resolve_session("abc").id == "abc-1"
        assert store.resolve_session("latest").id == "abd-2"
        with pytest.raises(SessionNotFound, match="several"):
            store.resolve_session("ab")
        with pytest.raises(SessionNotFound):
            store.resolve_session("zzz")

    def test_fork_records_parent(self, store: Store) -> None:
        parent = store.create_session()
        t = store.append_message(parent.id, user("hi"))
        child = store.create_session(parent_session=parent.id, fork_turn=t.id)
        assert child.parent_session == parent.id and child.fork_turn == t.id


class TestAppend:
    def test_appends_chain_from_the_active_leaf(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("one"))
        b = store.append_message(s.id, assistant("two"))
        assert b.parent_id == a.id and b.depth == 1
        assert store.get_session(s.id).active_leaf == b.id
        assert [t.id for t in store.path(s.id)] == [a.id, b.id]

    def test_same_parent_twice_makes_a_branch(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("q"))
        b1 = store.append_message(s.id, assistant("x"), parent_id=a.id)
        b2 = store.append_message(s.id, assistant("y"), parent_id=a.id)
        assert {t.id for t in store.children(s.id, a.id)} == {b1.id, b2.id}
        assert {t.id for t in store.leaves(s.id)} == {b1.id, b2.id}
        assert store.common_ancestor(s.id, b1.id, b2.id).id == a.id  # type: ignore[union-attr]

    def test_parent_none_makes_a_new_root(self, store: Store) -> None:
        s = store.create_session()
        store.append_message(s.id, user("a"))
        r = store.append_message(s.id, user("b"), parent_id=None)
        assert r.parent_id is None and r.depth == 0
        assert len(store.children(s.id, None)) == 2

    def test_navigate_moves_the_leaf_and_appends_continue_there(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("a"))
        store.append_message(s.id, assistant("b"))
        store.navigate(s.id, a.id)
        c = store.append_message(s.id, user("c"))
        assert c.parent_id == a.id
        assert [m["content"] for m in store.context(s.id).messages] == ["a", "c"]
        store.navigate(s.id, None)
        assert store.context(s.id).messages == []
        assert store.append_message(s.id, user("root")).parent_id is None

    def test_generated_ids_are_short_hex_and_given_ids_kept(self, store: Store) -> None:
        s = store.create_session()
        t = store.append_message(s.id, user("a"))
        assert len(t.id) == 8 and int(t.id, 16) >= 0
        u = store.append_entry(s.id, {"type": "message", "id": "mine", "message": user("b")})
        assert u.id == "mine"

    def test_exchange_in_one_turn(self, store: Store) -> None:
        s = store.create_session()
        t = store.append_messages(s.id, [user("q"), assistant("a")])
        assert len(t.entry["messages"]) == 2
        assert store.get_turn(s.id, t.id).entry["messages"][1]["content"][0]["text"] == "a"
        assert [m["role"] for m in store.context(s.id).messages] == ["user", "assistant"]

    def test_every_kind_and_unknown_kinds_are_kept(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("hi"))
        entries = [
            {"type": "model_change", "provider": "p", "modelId": "m"},
            {"type": "thinking_level_change", "thinkingLevel": "high"},
            {"type": "custom", "customType": "ext", "data": {"k": [1, 2]}},
            {"type": "custom_message", "customType": "ext", "content": "note", "display": False},
            {"type": "session_info", "name": "My session"},
            {"type": "label", "targetId": a.id, "label": "start"},
            {"type": "branch_summary", "fromId": a.id, "summary": "tried"},
            {"type": "unknown_future_entry_type", "payload": {"x": None}},
        ]
        for e in entries:
            t = store.append_entry(s.id, e)
            got = store.get_turn(s.id, t.id).entry
            assert {k: got[k] for k in e} == e
        ctx = store.context(s.id)
        assert ctx.model == {"provider": "p", "modelId": "m"}
        assert ctx.thinking_level == "high"
        assert [m["role"] for m in ctx.messages] == ["user", "custom", "branchSummary"]
        assert store.labels(s.id) == {a.id: "start"}

    def test_usage_and_tool_columns_are_queryable(self, store: Store) -> None:
        s = store.create_session()
        store.append_message(s.id, assistant("x"))
        store.append_message(
            s.id,
            {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
             "content": [{"type": "text", "text": "boom"}], "isError": True, "timestamp": 3},
        )
        rows = store.conn.execute(
            "select role, tool_name, is_error, input_tokens, cost, text from messages order by id"
        ).fetchall()
        assert rows == [("assistant", None, None, 10, 0.3, "x"), ("toolResult", "bash", 1, None, None, "boom")]

    def test_labels_latest_wins_and_empty_clears(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("a"))
        store.set_label(s.id, a.id, "one")
        store.set_label(s.id, a.id, "two")
        assert store.labels(s.id) == {a.id: "two"}
        store.set_label(s.id, a.id, None)
        assert store.labels(s.id) == {}


class TestCompaction:
    def test_context_starts_at_first_kept_and_stays_small(self, store: Store) -> None:
        s = store.create_session()
        ids = [store.append_message(s.id, user(f"m{i}")).id for i in range(10)]
        c = store.append_compaction(s.id, "summary of m0..m7", ids[8], 1234)
        store.append_message(s.id, user("after"))
        ctx = store.context(s.id)
        assert ctx.messages[0]["role"] == "compactionSummary"
        assert ctx.messages[0]["tokensBefore"] == 1234
        assert [m.get("content") for m in ctx.messages[1:]] == ["m8", "m9", "after"]
        assert ctx.turn_ids[0] == c.id
        # nothing deleted: the earlier leaf still sees everything
        assert len(store.context(s.id, ids[9]).messages) == 10

    def test_native_compaction_must_keep_an_ancestor(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("a"))
        store.append_message(s.id, user("b"), parent_id=a.id)
        other = store.append_message(s.id, user("other"), parent_id=None)
        before = store.conn.execute("select count(*) from turns").fetchone()
        with pytest.raises(InvalidEntry, match="not an ancestor"):
            store.append_compaction(s.id, "s", a.id, 1)  # leaf is `other`, a is not above it
        with pytest.raises(InvalidEntry, match="not an ancestor"):
            store.append_compaction(s.id, "s", "missing", 1)
        assert store.conn.execute("select count(*) from turns").fetchone() == before
        assert store.get_session(s.id).active_leaf == other.id

    def test_status_counts_compactions_and_tokens(self, store: Store) -> None:
        s = store.create_session()
        a = store.append_message(s.id, user("x" * 400))
        store.append_compaction(s.id, "y" * 40, a.id, 100, trigger="manual", layer="summarize")
        st = store.status(s.id, window=1000)
        assert st.compactions == 1
        assert st.tokens == 10 + 100  # summary 40/4 + kept message 400/4
        assert st.percent == 11.0
        assert st.last_compaction is not None and st.last_compaction["trigger"] == "manual"
        assert st.threshold == 0  # 1000 - 20000 - 4000, floored


class TestBadInput:
    def dump(self, store: Store) -> list[str]:
        return list(store.conn.iterdump())

    def test_unknown_session_and_turn(self, store: Store) -> None:
        s = store.create_session()
        before = self.dump(store)
        with pytest.raises(SessionNotFound, match="'nope'"):
            store.append_message("nope", user("x"))
        with pytest.raises(TurnNotFound, match="'ghost'"):
            store.append_message(s.id, user("x"), parent_id="ghost")
        with pytest.raises(TurnNotFound):
            store.context(s.id, "ghost")
        with pytest.raises(TurnNotFound):
            store.navigate(s.id, "ghost")
        with pytest.raises(SessionNotFound):
            store.context("nope")
        assert self.dump(store) == before

    def test_parent_from_another_session(self, store: Store) -> None:
        s1, s2 = store.create_session(), store.create_session()
        t = store.append_message(s1.id, user("x"))
        before = self.dump(store)
        with pytest.raises(TurnNotFound, match=s2.id):
            store.append_message(s2.id, user("y"), parent_id=t.id)
        assert self.dump(store) == before

    @pytest.mark.parametrize(
        "entry",
        [
            {},
            {"type": 5},
            {"type": "message"},
            {"type": "message", "message": "text"},
            {"type": "message", "message": {"content": "no role"}},
            {"type": "message", "messages": []},
            {"type": "compaction", "summary": "s"},
            {"type": "compaction", "firstKeptEntryId": "x"},
            {"type": "label", "label": "x"},
            {"type": "session", "id": "h"},
            {"type": "message", "id": 7, "message": {"role": "user", "content": "x"}},
        ],
    )
    def test_invalid_entries_are_refused(self, store: Store, entry: dict[str, object]) -> None:
        s = store.create_session()
        before = self.dump(store)
        with pytest.raises(InvalidEntry):
            store.append_entry(s.id, entry)
        assert self.dump(store) == before

    def test_duplicate_turn_id(self, store: Store) -> None:
        s = store.create_session()
        store.append_entry(s.id, {"type": "message", "id": "a", "message": user("x")})
        with pytest.raises(InvalidEntry, match="already exists"):
            store.append_entry(s.id, {"type": "message", "id": "a", "message": user("y")})
        assert len(store.path(s.id)) == 1
