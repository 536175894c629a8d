"""Every Store behaviour on both backends, SQLite and PostgreSQL (issue 8).

The `backend` fixture gives a fresh store of each kind. The Store behaviour tests
(sessions, appends, branches, labels, compaction, bad input) live only here, and the
import/export and compaction behaviours of test_transfer.py and
test_compaction_store.py are repeated on both backends (SQLite file handling stays in
test_open.py). A hypothesis test checks the assembly of
random trees against the reference model on both, and another test checks that the
two backends give identical results for the same transcripts.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from nexus_store import InvalidEntry, NexusError, SessionNotFound, Store, TurnNotFound
from nexus_store.tokens import CharsEstimator, message_tokens
from tests.reference import reference_context
from tests.test_assembly_property import trees

pytest_plugins = ["tests.pg_server"]

FIXTURES = Path(__file__).parent / "fixtures" / "jsonl"
BACKENDS = ["sqlite", "postgres"]


def open_backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if kind == "sqlite":
        return Store(tmp_path / "conformance.db", counter="chars4")
    url = request.getfixturevalue("pg_server").create_schema()
    return Store(url, counter="chars4")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = open_backend(request.param, request, tmp_path)
    try:
        yield store
    finally:
        store.close()


def user(text: str, ts: int = 0) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def assistant(text: str, model: str = "m1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "prov",
        "model": model,
        "usage": {
            "input": 10,
            "output": 5,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 15,
            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3},
        },
        "stopReason": "stop",
        "timestamp": 1,
    }


def dump(store: Store) -> list[Any]:
    """Every row of the store's tables, in key order (the SQL is the same on both)."""
    return [
        store.conn.execute(f"select * from {table} order by {key}").fetchall()
        for table, key in (
            ("settings", "key"),
            ("sessions", "id"),
            ("turns", "id"),
            ("messages", "id"),
        )
    ]


class TestSessions:
    def test_create_get_list(self, backend: Store) -> None:
        a = backend.create_session(cwd="/a", title="first")
        b = backend.create_session(id="fixed-id")
        assert backend.get_session(a.id).cwd == "/a"
        assert backend.get_session("fixed-id").id == b.id
        assert {s.id for s in backend.list_sessions()} == {a.id, "fixed-id"}
        assert backend.list_sessions(limit=1)[0].id == "fixed-id"
        assert backend.find_session("nope") is None

    def test_duplicate_session_id_is_refused(self, backend: Store) -> None:
        backend.create_session(id="x")
        before = dump(backend)
        with pytest.raises(InvalidEntry, match="already exists"):
            backend.create_session(id="x")
        assert dump(backend) == before

    def test_resolve_by_prefix_and_latest(self, backend: Store) -> None:
        backend.create_session(id="abc-1")
        backend.create_session(id="abd-2")
        backend.create_session(id="a%_c")
        assert backend.resolve_session("abc").id == "abc-1"
        assert backend.resolve_session("a%").id == "a%_c"  # LIKE wildcards are escaped
        assert backend.resolve_session("latest").id == "a%_c"
        with pytest.raises(SessionNotFound, match="several"):
            backend.resolve_session("ab")
        with pytest.raises(SessionNotFound):
            backend.resolve_session("zzz")

    def test_fork_records_parent_and_title(self, backend: Store) -> None:
        parent = backend.create_session()
        t = backend.append_message(parent.id, user("hi"))
        child = backend.create_session(parent_session=parent.id, fork_turn=t.id)
        assert child.parent_session == parent.id and child.fork_turn == t.id
        assert backend.set_title(child.id, "named").title == "named"


class TestAppend:
    def test_appends_chain_from_the_active_leaf(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("one"))
        b = backend.append_message(s.id, assistant("two"))
        assert b.parent_id == a.id and b.depth == 1 and b.seq == 1
        assert backend.get_session(s.id).active_leaf == b.id
        assert backend.get_session(s.id).turn_count == 2
        assert [t.id for t in backend.path(s.id)] == [a.id, b.id]

    def test_same_parent_twice_makes_a_branch(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("q"))
        b1 = backend.append_message(s.id, assistant("x"), parent_id=a.id)
        b2 = backend.append_message(s.id, assistant("y"), parent_id=a.id)
        assert [t.id for t in backend.children(s.id, a.id)] == [b1.id, b2.id]
        assert [t.id for t in backend.leaves(s.id)] == [b1.id, b2.id]
        assert backend.common_ancestor(s.id, b1.id, b2.id).id == a.id  # type: ignore[union-attr]

    def test_parent_none_makes_a_new_root(self, backend: Store) -> None:
        s = backend.create_session()
        backend.append_message(s.id, user("a"))
        r = backend.append_message(s.id, user("b"), parent_id=None)
        assert r.parent_id is None and r.depth == 0
        assert len(backend.children(s.id, None)) == 2

    def test_navigate_moves_the_leaf_and_appends_continue_there(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("a"))
        backend.append_message(s.id, assistant("b"))
        backend.navigate(s.id, a.id)
        c = backend.append_message(s.id, user("c"))
        assert c.parent_id == a.id
        assert [m["content"] for m in backend.context(s.id).messages] == ["a", "c"]
        backend.navigate(s.id, None)
        assert backend.context(s.id).messages == []
        assert backend.append_message(s.id, user("root")).parent_id is None

    def test_generated_ids_are_short_hex_and_given_ids_kept(self, backend: Store) -> None:
        s = backend.create_session()
        t = backend.append_message(s.id, user("a"))
        assert len(t.id) == 8 and int(t.id, 16) >= 0
        u = backend.append_entry(s.id, {"type": "message", "id": "mine", "message": user("b")})
        assert u.id == "mine"

    def test_exchange_in_one_turn(self, backend: Store) -> None:
        s = backend.create_session()
        t = backend.append_messages(s.id, [user("q"), assistant("a")])
        assert len(t.entry["messages"]) == 2
        assert backend.get_turn(s.id, t.id).entry["messages"][1]["content"][0]["text"] == "a"
        assert [m["role"] for m in backend.context(s.id).messages] == ["user", "assistant"]

    def test_every_kind_and_unknown_kinds_are_kept(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("hi"))
        entries = [
            {"type": "model_change", "provider": "p", "modelId": "m"},
            {"type": "thinking_level_change", "thinkingLevel": "high"},
            {"type": "custom", "customType": "ext", "data": {"k": [1, 2], "big": 2**62, "f": 0.1}},
            {"type": "custom_message", "customType": "ext", "content": "note", "display": False},
            {"type": "session_info", "name": "My session"},
            {"type": "label", "targetId": a.id, "label": "start"},
            {"type": "branch_summary", "fromId": a.id, "summary": "tried"},
            {"type": "unknown_future_entry_type", "payload": {"x": None}, "text": "a\x00b\ud800"},
        ]
        for e in entries:
            t = backend.append_entry(s.id, e)
            got = backend.get_turn(s.id, t.id).entry
            assert {k: got[k] for k in e} == e
        ctx = backend.context(s.id)
        assert ctx.model == {"provider": "p", "modelId": "m"}
        assert ctx.thinking_level == "high"
        assert [m["role"] for m in ctx.messages] == ["user", "custom", "branchSummary"]
        assert backend.labels(s.id) == {a.id: "start"}

    def test_strings_sqlite_keeps_and_postgres_text_cannot(self, backend: Store) -> None:
        """NUL characters and lone surrogates come back exactly (kept as JSON escapes)."""
        s = backend.create_session()
        odd = "nul\x00 and \ud83d lone"
        t = backend.append_message(s.id, {"role": "user", "content": odd, "timestamp": 0})
        assert backend.get_turn(s.id, t.id).entry["message"]["content"] == odd
        assert backend.context(s.id).messages[0]["content"] == odd

    def test_usage_and_tool_columns_are_queryable(self, backend: Store) -> None:
        s = backend.create_session()
        backend.append_message(s.id, assistant("x"))
        backend.append_message(
            s.id,
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "content": [{"type": "text", "text": "boom"}],
                "isError": True,
                "timestamp": 3,
            },
        )
        rows = backend.conn.execute(
            "select role, tool_name, is_error, input_tokens, cost, text from messages order by id"
        ).fetchall()
        assert [tuple(r) for r in rows] == [
            ("assistant", None, None, 10, 0.3, "x"),
            ("toolResult", "bash", 1, None, None, "boom"),
        ]

    def test_labels_latest_wins_and_empty_clears(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("a"))
        backend.set_label(s.id, a.id, "one")
        backend.set_label(s.id, a.id, "two")
        assert backend.labels(s.id) == {a.id: "two"}
        backend.set_label(s.id, a.id, None)
        assert backend.labels(s.id) == {}


class TestCompaction:
    def test_context_starts_at_first_kept_and_stays_small(self, backend: Store) -> None:
        s = backend.create_session()
        ids = [backend.append_message(s.id, user(f"m{i}")).id for i in range(10)]
        c = backend.append_compaction(s.id, "summary of m0..m7", ids[8], 1234)
        backend.append_message(s.id, user("after"))
        ctx = backend.context(s.id)
        assert ctx.messages[0]["role"] == "compactionSummary"
        assert ctx.messages[0]["tokensBefore"] == 1234
        assert [m.get("content") for m in ctx.messages[1:]] == ["m8", "m9", "after"]
        assert ctx.turn_ids[0] == c.id
        assert len(backend.context(s.id, ids[9]).messages) == 10
        assert [t.id for t in backend.compaction_history(s.id)] == [c.id]

    def test_native_compaction_must_keep_an_ancestor(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("a"))
        backend.append_message(s.id, user("b"), parent_id=a.id)
        other = backend.append_message(s.id, user("other"), parent_id=None)
        before = dump(backend)
        with pytest.raises(InvalidEntry, match="not an ancestor"):
            backend.append_compaction(s.id, "s", a.id, 1)
        with pytest.raises(InvalidEntry, match="not an ancestor"):
            backend.append_compaction(s.id, "s", "missing", 1)
        assert dump(backend) == before
        assert backend.get_session(s.id).active_leaf == other.id

    def test_status_counts_compactions_and_tokens(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("x" * 400))
        backend.append_compaction(s.id, "y" * 40, a.id, 100, trigger="manual", layer="summarize")
        st = backend.status(s.id, window=1000)
        assert st.compactions == 1
        assert st.tokens == 10 + 100
        assert st.percent == 11.0
        assert st.last_compaction is not None and st.last_compaction["trigger"] == "manual"

    def test_store_compact_writes_a_turn_and_loses_nothing(self, backend: Store) -> None:
        s = backend.create_session()
        for i in range(6):
            backend.append_message(s.id, user(f"task {i}: edit src/f{i}.py " + "words " * 40, i))
            backend.append_message(s.id, assistant(f"done {i} " + "more " * 40))
        before = {
            t.id: backend.context(s.id, t.id).to_json_dict() for t in backend.iter_turns(s.id)
        }
        dry = backend.compact(s.id, summarizer="extractive", keep_recent_tokens=60, dry_run=True)
        assert dry.turn is None and dump(backend)
        result = backend.compact(s.id, summarizer="extractive", keep_recent_tokens=60)
        assert result.turn is not None and result.turn.kind == "compaction"
        ctx = backend.context(s.id)
        assert ctx.messages[0]["role"] == "compactionSummary"
        for turn_id, old in before.items():
            assert backend.context(s.id, turn_id).to_json_dict() == old
        assert backend.status(s.id).compactions == 1
        again = backend.compact(s.id, summarizer="extractive", keep_recent_tokens=20)
        assert again.turn is not None and backend.status(s.id).compactions == 2

    def test_flush_epoch_and_branch_summary_on_navigate(self, backend: Store) -> None:
        s = backend.create_session()
        a = backend.append_message(s.id, user("start"))
        backend.append_message(s.id, assistant("tried something " * 10))
        summary = backend.navigate_with_summary(s.id, a.id, summarizer="extractive")
        assert summary is not None and summary.kind == "branch_summary"
        assert backend.get_session(s.id).active_leaf == summary.id
        assert backend.should_flush(s.id)
        epoch = backend.record_flush(s.id)
        assert backend.get_session(s.id).flush_epoch == epoch and not backend.should_flush(s.id)


class TestErrors:
    def test_unknown_session_and_turn_change_nothing(self, backend: Store) -> None:
        s = backend.create_session()
        before = dump(backend)
        with pytest.raises(SessionNotFound, match="'nope'"):
            backend.append_message("nope", user("x"))
        with pytest.raises(TurnNotFound, match="'ghost'"):
            backend.append_message(s.id, user("x"), parent_id="ghost")
        with pytest.raises(TurnNotFound):
            backend.context(s.id, "ghost")
        with pytest.raises(TurnNotFound):
            backend.navigate(s.id, "ghost")
        with pytest.raises(SessionNotFound):
            backend.context("nope")
        assert dump(backend) == before

    def test_parent_from_another_session(self, backend: Store) -> None:
        s1, s2 = backend.create_session(), backend.create_session()
        t = backend.append_message(s1.id, user("x"))
        before = dump(backend)
        with pytest.raises(TurnNotFound, match=s2.id):
            backend.append_message(s2.id, user("y"), parent_id=t.id)
        assert dump(backend) == before

    @pytest.mark.parametrize(
        "entry",
        [
            {},
            {"type": "message", "message": "text"},
            {"type": "message", "messages": []},
            {"type": "compaction", "summary": "s"},
            {"type": "label", "label": "x"},
            {"type": "session", "id": "h"},
            {"type": "message", "id": 7, "message": {"role": "user", "content": "x"}},
        ],
    )
    def test_invalid_entries_are_refused(self, backend: Store, entry: dict[str, Any]) -> None:
        s = backend.create_session()
        before = dump(backend)
        with pytest.raises(InvalidEntry):
            backend.append_entry(s.id, entry)
        assert dump(backend) == before

    def test_duplicate_turn_id_keeps_the_transaction_usable(self, backend: Store) -> None:
        s = backend.create_session()
        backend.append_entry(s.id, {"type": "message", "id": "a", "message": user("x")})
        with pytest.raises(InvalidEntry, match="already exists"):
            backend.append_entry(s.id, {"type": "message", "id": "a", "message": user("y")})
        assert len(backend.path(s.id)) == 1
        with backend.atomic():
            with pytest.raises(InvalidEntry, match="already exists"):
                backend.append_entry(s.id, {"type": "message", "id": "a", "message": user("y")})
            backend.append_message(s.id, user("still fine"))
        assert len(backend.path(s.id)) == 2

    def test_atomic_rolls_back_everything(self, backend: Store) -> None:
        s = backend.create_session()
        before = dump(backend)
        with pytest.raises(RuntimeError), backend.atomic():
            backend.append_message(s.id, user("a"))
            with backend.atomic():
                backend.append_message(s.id, user("b"))
            raise RuntimeError("boom")
        assert dump(backend) == before

    def test_nothing_to_compact(self, backend: Store) -> None:
        s = backend.create_session()
        with pytest.raises(NexusError, match="no turns"):
            backend.compact(s.id, summarizer="extractive")


class TestTransfer:
    @pytest.mark.parametrize(
        "name",
        [
            "pi-v3-quirks.jsonl",
            "pi-v2-hook.jsonl",
            "claude-code-parallel.jsonl",
            "compaction-events.ndjson",
            "oc-7f3a.jsonl.reset.2026-02-24T10-05-00.000Z",
        ],
    )
    def test_import_is_idempotent_and_exports_the_same(
        self, backend: Store, tmp_path: Path, name: str
    ) -> None:
        path = FIXTURES / name
        report = backend.import_paths([path])
        assert not report.errors and report.turns > 0
        again = backend.import_paths([path])
        assert again.turns == 0 and again.conflicts == 0
        with Store(tmp_path / "reference.db", counter="chars4") as ref:
            ref_report = ref.import_paths([path])
            assert ref_report.model_dump(exclude={"seconds"}) == report.model_dump(
                exclude={"seconds"}
            )
            for sid in report.sessions:
                out, ref_out = io.StringIO(), io.StringIO()
                backend.export_jsonl(sid, out)
                ref.export_jsonl(sid, ref_out)
                assert out.getvalue() == ref_out.getvalue()
                for turn in ref.iter_turns(sid):
                    assert backend.context(sid, turn.id) == ref.context(sid, turn.id)
                    assert backend.status(sid, turn.id) == ref.status(sid, turn.id)
                assert backend.labels(sid) == ref.labels(sid)
                assert [t.id for t in backend.leaves(sid)] == [t.id for t in ref.leaves(sid)]

    def test_backup_and_restore_round_trip(self, backend: Store, tmp_path: Path) -> None:
        (sid,) = backend.import_jsonl(FIXTURES / "pi-v3-quirks.jsonl")
        backup = backend.backup_session(sid)
        with Store(tmp_path / "restored.db", counter="chars4") as other:
            assert other.restore_session(backup) == sid
            assert other.backup_session(sid)["entries"] == backup["entries"]
            assert other.restore_session(backup) == sid  # again: nothing changes

    def test_round_trip_of_a_native_session(self, backend: Store) -> None:
        s = backend.create_session(cwd="/x")
        a = backend.append_message(s.id, user("q", 1))
        backend.append_message(s.id, assistant("a1"))
        backend.append_message(s.id, assistant("a2"), parent_id=a.id)
        out = io.StringIO()
        backend.export_jsonl(s.id, out)
        lines = [json.loads(x) for x in out.getvalue().split("\n") if x]
        assert lines[0]["type"] == "session" and len(lines) == 4


# -- random trees against the reference model, on both backends ------------------------

_SHARED: dict[str, Store] = {}


@pytest.fixture(params=BACKENDS)
def shared_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Store:
    """One store per backend for many hypothesis examples (each in its own session)."""
    kind = request.param
    if kind not in _SHARED:
        _SHARED[kind] = open_backend(kind, request, tmp_path_factory.mktemp("shared"))
        request.addfinalizer(lambda: _SHARED.pop(kind).close())
    return _SHARED[kind]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=trees())
def test_context_of_every_turn_matches_the_reference(
    shared_backend: Store, entries: list[dict[str, Any]]
) -> None:
    source = uuid.uuid4().hex
    sid, _ = shared_backend.ingest(
        {"type": "session", "id": source, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        ((i + 1, dict(e), None) for i, e in enumerate(entries)),
        source_format="pi",
        source_id=source,
    )
    assert [t.entry for t in shared_backend.iter_turns(sid)] == entries
    counter = CharsEstimator()
    for e in entries:
        ctx = shared_backend.context(sid, e["id"])
        want = reference_context(entries, e["id"])
        assert ctx.messages == want["messages"], e["id"]
        assert ctx.model == want["model"]
        thinking = want["thinking_level"]
        assert ctx.thinking_level == (thinking if isinstance(thinking, str) else None)
        assert ctx.tokens == sum(message_tokens(counter, m) for m in ctx.messages)


def test_text_that_is_not_storable_stays_exact_and_out_of_text_columns(backend: Store) -> None:
    """A NUL or lone surrogate (PostgreSQL text refuses NUL; neither is UTF-8-safe) is kept
    in JSON, exactly, and never reaches a text column such as the session title."""
    entries = [
        {
            "type": "message",
            "id": "m1",
            "parentId": None,
            "message": {"role": "user", "content": "a\x00b"},
        },
        {"type": "session_info", "id": "i1", "parentId": "m1", "name": "\x00"},
        {"type": "label", "id": "l1", "parentId": "i1", "targetId": "m1", "label": "x\ud800"},
    ]
    sid, counts = backend.ingest(
        {"type": "session", "id": "nul"},
        [(n, e, None) for n, e in enumerate(entries, 1)],
        source_format="pi",
        source_id="nul",
    )
    assert counts.turns == 3
    assert [t.entry for t in backend.iter_turns(sid)] == entries
    assert backend.get_session(sid).title is None
    with pytest.raises(InvalidEntry, match="lone surrogate or NUL"):
        backend.create_session(title="t\x00")
