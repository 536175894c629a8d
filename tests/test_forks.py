"""Forked sessions under doctor, doctor --fix and gc, on both backends (issue 14).

A forked session's roots continue the parent session's path (their path values
come from the fork turn), a rule that doctor once did not know: it called such a
root corrupt and ``--fix`` cut the forked context short. Here forks of every kind
(a fork of a fork, a fork at a compaction, a fork of an imported session) go
through doctor, doctor --fix and gc, and every leaf's context must stay the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import Store
from tests.reference import reference_context
from tests.test_assembly_property import trees
from tests.test_conformance import BACKENDS, open_backend

pytest_plugins = ["tests.pg_server"]

FIXTURES = Path(__file__).parent / "fixtures" / "jsonl"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = open_backend(request.param, request, tmp_path)
    try:
        yield store
    finally:
        store.close()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def contexts(store: Store) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every leaf's context messages, keyed by (session, leaf)."""
    out = {}
    for session in store.list_sessions():
        for leaf in store.leaves(session.id):
            ctx = store.context(session.id, leaf.id)
            out[session.id, leaf.id] = [*ctx.messages, ctx.tokens]
    return out


def build_forks(store: Store) -> dict[str, str]:
    """Sessions with forks of every kind; returns their ids by name."""
    a = store.create_session(id="A")
    a1 = store.append_message(a.id, user("a one"))
    a2 = store.append_message(a.id, user("a two"))
    c = store.append_compaction(a.id, "summary of A", a2.id, 100)
    store.append_message(a.id, user("a after the compaction"))
    # B: forked from A's second turn (the case), one turn appended
    b = store.create_session(id="B", parent_session=a.id, fork_turn=a2.id)
    b1 = store.append_message(b.id, user("b one"))
    store.append_message(b.id, user("b two"))
    store.append_message(b.id, user("b branch"), parent_id=b1.id)  # a branch inside B
    # C: a fork of the fork
    fork_c = store.create_session(id="C", parent_session=b.id, fork_turn=b1.id)
    store.append_message(fork_c.id, user("c one"))
    # D: forked at A's compaction
    d = store.create_session(id="D", parent_session=a.id, fork_turn=c.id)
    store.append_message(d.id, user("d one"))
    store.append_message(d.id, user("d new root"), parent_id=None)  # another root of D
    # E: an imported session, and F forked from it
    (e_id,) = store.import_jsonl(FIXTURES / "pi-v3-quirks.jsonl")
    e_leaf = store.get_session(e_id).active_leaf
    assert e_leaf is not None
    f = store.create_session(id="F", parent_session=e_id, fork_turn=e_leaf)
    store.append_message(f.id, user("f one"))
    del a1
    return {"A": a.id, "B": b.id, "C": fork_c.id, "D": d.id, "E": e_id, "F": f.id}


class TestForksUnderMaintenance:
    def test_fork_contexts_continue_the_parent(self, backend: Store) -> None:
        build_forks(backend)
        texts = [m["content"] for m in backend.context("C").messages]
        assert texts == ["a one", "a two", "b one", "c one"]
        d = [m.get("content", m.get("summary")) for m in backend.context("D").messages]
        assert d == ["summary of A", "a two", "d new root"]

    def test_doctor_finds_nothing_wrong_in_forks(self, backend: Store) -> None:
        build_forks(backend)
        report = backend.doctor()
        assert report.findings == [], [f.message for f in report.findings]
        assert report.ok and report.turns_checked > 15

    def test_doctor_fix_keeps_every_context(self, backend: Store) -> None:
        build_forks(backend)
        before = contexts(backend)
        report = backend.doctor(fix=True)
        assert report.ok and report.actions == []
        assert contexts(backend) == before

    def test_fix_repairs_a_damaged_fork_root_from_its_fork_turn(self, backend: Store) -> None:
        build_forks(backend)
        before = contexts(backend)
        root = backend.path("B")[0]
        backend.conn.execute(
            "update turns set depth = 0, run_parent_id = null where uid = ? and session_id = "
            "(select id from sessions where uid = 'B')",
            [root.id],
        )
        report = backend.doctor()
        found = {(f.check, f.session) for f in report.findings}
        # the root, and the turns checked against it (its children; C's root forks from it)
        assert found == {("path_values", "B"), ("path_values", "C")}
        assert root.id in {f.turn for f in report.findings}
        fixed = backend.doctor(fix=True)
        assert fixed.ok and all(f.fixed for f in fixed.findings)
        assert contexts(backend) == before
        assert backend.doctor().findings == []

    def test_gc_keeps_every_context_and_doctor_stays_clean(self, backend: Store) -> None:
        if not backend.capabilities.gc:
            pytest.skip("this backend declares no gc (Store.capabilities.gc)")
        build_forks(backend)
        before = contexts(backend)
        leaves = [leaf for (_, leaf) in before]
        report = backend.gc(
            all_sessions=True,
            dead_branches_older_than=0,
            compacted_older_than=0,
            keep=leaves,
        )
        assert report.compacted_turns > 0  # A's first turn is behind its compaction
        assert contexts(backend) == before
        assert backend.doctor().findings == []
        assert backend.doctor(fix=True).ok
        assert contexts(backend) == before


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=trees(), where=st.integers(min_value=0))
def test_random_forks_match_the_reference_and_doctor_agrees(
    backend: Store, entries: list[dict[str, Any]], where: int
) -> None:
    """A fork at any turn of a random tree: its context is the reference's for the fork
    turn's path plus the fork's own turns, and doctor (which recomputes path values with
    the rule appends use) finds nothing to repair."""
    source = uuid.uuid4().hex
    parent, _ = backend.ingest(
        {"type": "session", "id": source, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        ((i + 1, dict(e), None) for i, e in enumerate(entries)),
        source_format="pi",
        source_id=source,
    )
    fork_at = entries[where % len(entries)]["id"]
    fork = backend.create_session(parent_session=parent, fork_turn=fork_at)
    first = backend.append_message(fork.id, user("forked one"))
    second = backend.append_message(fork.id, user("forked two"))
    tail = [
        {"type": "message", "id": first.id, "parentId": fork_at, "message": first.entry["message"]},
        {
            "type": "message",
            "id": second.id,
            "parentId": first.id,
            "message": second.entry["message"],
        },
    ]
    want = reference_context([*entries, *tail], second.id)
    before = backend.context(fork.id)
    assert before.messages == want["messages"]
    report = backend.doctor()
    assert not [f for f in report.findings if f.check == "path_values"], report.findings
    backend.doctor(fix=True)
    assert backend.context(fork.id) == before
