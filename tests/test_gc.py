"""Retention: `Store.gc` and ``nexus-store gc`` remove what is asked and keep every tree valid."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from nexus_store import NexusError, SessionNotFound, Store
from nexus_store.cli import cli
from tests.reliability_helpers import all_contexts, dump, msg, raw, stamp

NOW = datetime(2021, 1, 1, tzinfo=UTC)  # 366 days after the first stamp


def _branchy(store: Store) -> tuple[str, list[str], list[str]]:
    """main: a0..a5 (old); dead branch b0..b2 off a2 (old); branch summary back at a2."""
    s = store.create_session(cwd="/repo")
    a = [store.append_entry(s.id, msg(f"a{i}", i)).id for i in range(3)]
    store.navigate(s.id, a[2])
    b = [store.append_entry(s.id, msg(f"b{i}", 3 + i)).id for i in range(3)]
    summary = store.append_entry(
        s.id,
        {
            "type": "branch_summary",
            "parentId": a[2],
            "fromId": a[2],
            "summary": "tried b",
            "timestamp": stamp(7),
        },
    )
    a += [summary.id] + [store.append_entry(s.id, msg(f"a{i}", 8 + i)).id for i in range(3, 6)]
    return s.id, a, b


class TestDeadBranches:
    def test_removes_old_dead_branch_and_keeps_branch_summary(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            sid, a, b = _branchy(store)
            before = store.context(sid).model_dump()
            report = store.gc(sid, dead_branches_older_than=30, now=NOW)
            assert report.dead_branch_turns == 3 and report.compacted_turns == 0
            assert report.messages == 3
            remaining = {t.id for t in store.iter_turns(sid)}
            assert remaining == set(a) and not remaining & set(b)
            assert store.context(sid).model_dump() == before
            kinds = [t.kind for t in store.path(sid)]
            assert "branch_summary" in kinds
            assert store.doctor().ok

    def test_young_dead_branch_stays(self, store: Store) -> None:
        sid, _a, b = _branchy(store)
        # the dead branch's newest turn is day 5: 361 days before NOW
        report = store.gc(sid, dead_branches_older_than=362, now=NOW)
        assert report.dead_branch_turns == 0
        assert {t.id for t in store.iter_turns(sid)} >= set(b)

    def test_one_young_turn_keeps_its_whole_dead_subtree(self, store: Store) -> None:
        sid, a, b = _branchy(store)
        store.append_entry(sid, msg("new", 365, parentId=b[2]))
        store.navigate(sid, a[-1])
        assert store.gc(sid, dead_branches_older_than=30, now=NOW).dead_branch_turns == 0

    def test_turn_without_timestamp_is_never_old(self, store: Store) -> None:
        sid, a, b = _branchy(store)
        store.append_entry(sid, {"type": "custom", "customType": "x", "parentId": b[2]})
        store.navigate(sid, a[-1])
        # the custom turn got "now" as timestamp (native append), so it is young
        assert store.gc(sid, dead_branches_older_than=30, now=NOW).dead_branch_turns == 0

    def test_kept_turn_keeps_its_path(self, store: Store) -> None:
        sid, _a, b = _branchy(store)
        before = store.context(sid, b[2]).model_dump()
        report = store.gc(sid, dead_branches_older_than=30, keep=[b[2]], now=NOW)
        assert report.dead_branch_turns == 0
        assert store.context(sid, b[2]).model_dump() == before

    def test_fork_point_of_another_session_stays(self, store: Store) -> None:
        sid, _a, b = _branchy(store)
        store.create_session(parent_session=sid, fork_turn=b[1])
        report = store.gc(sid, dead_branches_older_than=30, now=NOW)
        assert report.dead_branch_turns == 1  # b2 only: b0, b1 lead to the fork point
        assert store.get_turn(sid, b[1]).id == b[1]

    def test_label_on_a_dead_branch_that_labels_a_live_turn_stays(self, store: Store) -> None:
        sid, a, b = _branchy(store)
        store.append_entry(
            sid,
            {
                "type": "label",
                "targetId": a[0],
                "label": "start",
                "parentId": b[2],
                "timestamp": stamp(6),
            },
        )
        store.navigate(sid, a[-1])
        labels = store.labels(sid)
        assert labels == {a[0]: "start"}
        store.gc(sid, dead_branches_older_than=30, now=NOW)
        assert store.labels(sid) == labels

    def test_dry_run_changes_nothing_and_estimates_bytes(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            sid, _a, _b = _branchy(store)
            store.conn.execute("pragma wal_checkpoint(truncate)")
            before = dump(store_path)
            dry = store.gc(sid, dead_branches_older_than=30, dry_run=True, now=NOW)
            assert dump(store_path) == before
            assert dry.dry_run and dry.dead_branch_turns == 3 and dry.estimated_bytes > 0
            assert dry.actions == []
            real = store.gc(sid, dead_branches_older_than=30, now=NOW)
            assert (real.dead_branch_turns, real.messages) == (dry.dead_branch_turns, dry.messages)
            assert real.estimated_bytes == dry.estimated_bytes


def _compacted(store: Store) -> tuple[str, list[str], str]:
    """a0..a9 (days 0-9), a compaction keeping from a6, then c0..c2; a side branch off a7."""
    s = store.create_session()
    a = [store.append_entry(s.id, msg(f"a{i}" * 50, i)).id for i in range(10)]
    comp = store.append_compaction(s.id, "summary of a0-a5", a[6], 1000, timestamp=stamp(10))
    for i in range(3):
        store.append_entry(s.id, msg(f"c{i}", 11 + i))
    store.append_entry(s.id, msg("side", 12, parentId=a[7]))  # a leaf whose context needs a0..
    store.navigate(s.id, store.leaves(s.id)[0].id)
    return s.id, a, comp.id


class TestCompacted:
    def test_turns_behind_a_compaction_go_when_no_leaf_needs_them(self, store: Store) -> None:
        s = store.create_session()
        a = [store.append_entry(s.id, msg(f"a{i}", i)).id for i in range(10)]
        store.append_compaction(s.id, "sum", a[6], 1000, timestamp=stamp(10))
        store.append_entry(s.id, msg("after", 11))
        before = all_contexts(store, s.id)
        report = store.gc(s.id, compacted_older_than=30, now=NOW)
        assert report.compacted_turns == 6
        assert report.reparented == [{"session": s.id, "turn": a[6], "old_parent": a[5]}]
        assert all_contexts(store, s.id) == before
        assert store.path(s.id)[0].id == a[6]
        assert store.get_turn(s.id, a[6]).parent_id is None
        report = store.doctor()
        assert report.ok, report
        # appending afterwards still gives the right context
        store.append_entry(s.id, msg("more", 12))
        ctx = store.context(s.id)
        assert ctx.messages[-1]["content"] == "more"
        assert ctx.messages[:-1] == before[store.leaves(s.id)[0].parent_id]["messages"]
        assert store.doctor().ok

    def test_a_branch_that_needs_old_turns_keeps_them(self, store: Store) -> None:
        sid, _a, _comp = _compacted(store)
        before = all_contexts(store, sid)
        report = store.gc(sid, compacted_older_than=30, now=NOW)
        assert report.compacted_turns == 0  # the side leaf's context uses a0..a7
        assert all_contexts(store, sid) == before

    def test_dead_branch_then_compacted(self, store: Store) -> None:
        sid, _a, _comp = _compacted(store)
        before = all_contexts(store, sid)
        active = store.get_session(sid).active_leaf
        assert active is not None
        report = store.gc(sid, dead_branches_older_than=30, compacted_older_than=30, now=NOW)
        assert report.dead_branch_turns == 1 and report.compacted_turns == 6
        assert all_contexts(store, sid) == {active: before[active]}
        assert store.doctor().ok

    def test_superseded_compaction_goes_and_counts_stay(self, store: Store) -> None:
        s = store.create_session()
        a = [store.append_entry(s.id, msg(f"a{i}", i)).id for i in range(6)]
        store.append_compaction(s.id, "one", a[3], 100, timestamp=stamp(6))
        b = [store.append_entry(s.id, msg(f"b{i}", 7 + i)).id for i in range(3)]
        store.append_compaction(s.id, "two", b[1], 100, timestamp=stamp(10))
        store.append_entry(s.id, msg("tail", 11))
        before = all_contexts(store, s.id)
        status = store.status(s.id)
        report = store.gc(s.id, compacted_older_than=30, now=NOW)
        assert report.compacted_turns == 6 + 1 + 1  # a0..a5, the first compaction, b0
        assert all_contexts(store, s.id) == before
        assert store.status(s.id) == status  # compactions on the path still counted
        assert store.doctor().ok

    def test_nothing_old_enough(self, store: Store) -> None:
        sid, _a, _c = _compacted(store)
        assert store.gc(sid, compacted_older_than=400, now=NOW).compacted_turns == 0


class TestSessions:
    def test_old_sessions_go_and_forked_ones_stay(self, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            old = store.create_session(created_utc=stamp(0))
            store.append_entry(old.id, msg("x" * 5000, 0))
            parent = store.create_session()
            store.append_entry(parent.id, msg("p", 0))
            child = store.create_session(parent_session=parent.id)
            raw_conn = raw(store_path)
            raw_conn.execute("update sessions set updated_utc = ?", [stamp(0)])
            raw_conn.execute(
                "update sessions set updated_utc = ? where uid = ?", [stamp(400), child.id]
            )
            raw_conn.close()
            size = store.gc(all_sessions=True, sessions_older_than=30, now=NOW, dry_run=True)
            assert size.sessions_removed == [old.id]
            report = store.gc(all_sessions=True, sessions_older_than=30, now=NOW)
            assert report.sessions_removed == [old.id]
            assert report.sessions_kept == [
                {"session": parent.id, "reason": f"session {child.id!r} forks from it"}
            ]
            assert store.find_session(old.id) is None
            assert report.file_bytes_after is not None and report.file_bytes_before is not None
            assert report.file_bytes_after < report.file_bytes_before
            assert store.doctor().ok

    def test_bad_arguments(self, store: Store) -> None:
        with pytest.raises(NexusError, match="one session id, or all_sessions"):
            store.gc()
        s = store.create_session()
        with pytest.raises(NexusError, match="not both"):
            store.gc(s.id, all_sessions=True)
        with pytest.raises(NexusError, match="days >= 0"):
            store.gc(s.id, dead_branches_older_than=-1)
        with pytest.raises(SessionNotFound):
            store.gc("nope")


class TestCli:
    def test_dry_run_json_then_real(self, runner: CliRunner, store_path: Path) -> None:
        with Store(store_path, counter="chars4") as store:
            sid, _a, _b = _branchy(store)
        args = ["--db", str(store_path), "gc", sid, "--dead-branches-older-than", "30"]
        result = runner.invoke(cli, [*args, "--dry-run", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["dead_branch_turns"] == 3
        result = runner.invoke(cli, [*args, "--yes"], catch_exceptions=False)
        assert result.exit_code == 0 and "removed: 3 dead-branch turns" in result.output
        assert "vacuumed" in result.output

    @pytest.mark.parametrize("argv", [[], ["x", "--all"], ["--all", "--sessions-older-than", "-1"]])
    def test_usage_errors_exit_2(
        self, runner: CliRunner, store_path: Path, argv: list[str]
    ) -> None:
        Store(store_path).close()
        result = runner.invoke(cli, ["--db", str(store_path), "gc", *argv])
        assert result.exit_code == 2, result.output

    def test_unknown_session_exits_1(self, runner: CliRunner, store_path: Path) -> None:
        Store(store_path).close()
        result = runner.invoke(cli, ["--db", str(store_path), "gc", "nope", "--dry-run"])
        assert result.exit_code == 1 and "nope" in result.output


# -- random trees -------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["msg"] * 6 + ["compact"] * 2 + ["summary", "label", "nav"]),
        st.integers(0, 10_000),
        st.integers(0, 365),
    ),
    min_size=12,
    max_size=60,
)


def _build(store: Store, ops: list[tuple[str, int, int]]) -> str:
    s = store.create_session()
    ids: list[str] = []
    for op, pick, day in ops:
        # mostly chains (as conversations are), sometimes a branch anywhere
        parent = (ids[pick % len(ids)] if pick % 10 == 9 else ids[-1]) if ids else None
        if op == "nav" and ids:
            store.navigate(s.id, parent)
        elif op == "compact" and parent is not None:
            path = [t.id for t in store.path(s.id, parent)]
            first = path[len(path) - 1 - (pick // 10) % min(len(path), 5)]  # near the leaf
            ids.append(
                store.append_compaction(
                    s.id, f"sum{day}", first, 10, parent_id=parent, timestamp=stamp(day)
                ).id
            )
        elif op == "summary" and parent is not None:
            ids.append(
                store.append_entry(
                    s.id,
                    {
                        "type": "branch_summary",
                        "parentId": parent,
                        "fromId": parent,
                        "summary": f"s{day}",
                        "timestamp": stamp(day),
                    },
                ).id
            )
        elif op == "label" and parent is not None:
            ids.append(
                store.append_entry(
                    s.id,
                    {
                        "type": "label",
                        "targetId": ids[day % len(ids)],
                        "label": f"l{day}",
                        "parentId": parent,
                        "timestamp": stamp(day),
                    },
                ).id
            )
        else:
            ids.append(store.append_entry(s.id, msg(f"m{day}", day, parentId=parent)).id)
    return s.id


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=OPS,
    dead=st.one_of(st.none(), st.integers(0, 300)),
    compacted=st.one_of(st.none(), st.integers(0, 300)),
    keep=st.integers(0, 10_000),
    batch=st.integers(1, 8),
)
@example(  # a young turn keeps a dead subtree whose old label leaf labels it (found by hypothesis)
    ops=[("msg", 0, 0)] * 5
    + [("msg", 0, 365), ("label", 0, 1), ("msg", 189, 0)]
    + [("msg", 0, 0)] * 4,
    dead=1,
    compacted=None,
    keep=0,
    batch=1,
)
def test_gc_keeps_every_remaining_leaf_context(
    ops: list[tuple[str, int, int]],
    dead: int | None,
    compacted: int | None,
    keep: int,
    batch: int,
) -> None:
    with Store(memory=True, counter="chars4") as store:
        sid = _build(store, ops)
        turns = [t.id for t in store.iter_turns(sid)]
        kept = [turns[keep % len(turns)]] if turns else []
        before = all_contexts(store, sid)
        for k in kept:
            before[k] = store.context(sid, k).model_dump()
        labels = store.labels(sid)
        batches: list[int] = []

        def after_each_batch(done: int, total: int) -> None:
            # issue 18: gc removes in batches, each its own transaction; after every one,
            # each context still there is unchanged and the file is sound
            batches.append(done)
            now = {
                i: store.context(sid, i).model_dump()
                for i in before
                if store.find_turn(sid, i) is not None
            }
            assert now == {i: before[i] for i in now}
            assert store.conn.execute("pragma foreign_key_check").fetchall() == []

        report = store.gc(
            sid,
            dead_branches_older_than=dead,
            compacted_older_than=compacted,
            keep=kept,
            now=NOW,
            batch_size=batch,
            progress=after_each_batch,
        )
        removed = report.dead_branch_turns + report.compacted_turns
        assert len(batches) == -(-removed // batch)  # ceil: bounded batches, none empty
        event(
            f"dead>0={report.dead_branch_turns > 0} compacted>0={report.compacted_turns > 0} "
            f"rerooted={bool(report.reparented)}"
        )
        after = {
            i: store.context(sid, i).model_dump()
            for i in before
            if store.find_turn(sid, i) is not None
        }
        assert after == {i: before[i] for i in after}
        active = store.get_session(sid).active_leaf
        assert active is None or active in after
        for k in kept:
            assert k in after

        # labels of every remaining turn stay (a label of a removed turn may linger)
        def alive(found: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in found.items() if store.find_turn(sid, k) is not None}

        assert alive(store.labels(sid)) == alive(labels)
        report = store.doctor()
        assert report.ok, report.findings
        assert store.conn.execute("pragma foreign_key_check").fetchall() == []
        # the store still works: append under a random remaining turn
        remaining = [t.id for t in store.iter_turns(sid)]
        if remaining:
            parent = random.Random(keep).choice(remaining)
            store.append_entry(sid, msg("next", 500, parentId=parent))
            assert store.doctor().ok


def test_vacuum_while_another_process_reads_does_not_raise(store_path: Path) -> None:
    import sqlite3

    with Store(store_path, counter="chars4", busy_timeout=0.05) as store:
        sid, _a, _b = _branchy(store)
        reader = sqlite3.connect(store_path)
        reader.execute("begin")
        reader.execute("select count(*) from turns").fetchone()  # holds a read snapshot
        try:
            report = store.gc(sid, dead_branches_older_than=30, now=NOW)
        finally:
            reader.close()
        assert report.dead_branch_turns == 3
        assert store.doctor().ok


def test_only_retention_deletes_rows() -> None:
    package = Path(__file__).resolve().parents[1] / "nexus_store"
    deleting = sorted(
        str(f.relative_to(package))
        for f in package.rglob("*.py")
        if "delete from" in f.read_text().lower()
    )
    # (store/gc_batches.py is the batched removal of what gc.py plans.) agent_sessions.py
    # deletes only agent_usage rows (usage the SDK session recorded for a user turn that
    # was popped or a branch that was deleted), never turns or messages. appends.py deletes
    # only the turn row its own append wrote in the same, uncommitted transaction when the
    # messages' statement failed (Appends._settle: an undo without a savepoint, issue 17).
    assert deleting == [
        "store/agent_sessions.py",
        "store/appends.py",
        "store/gc.py",
        "store/gc_batches.py",
        "store/sessions.py",
    ]
    # sessions.py deletes in one place only: a session that never got a turn (spawn rollback)
    core = (package / "store" / "sessions.py").read_text().lower()
    assert core.count("delete from") == 1
    assert core.index("delete from") > core.index("def delete_session_if_empty")


def test_gc_twice_keeps_both_notes_and_contexts(store: Store) -> None:
    s = store.create_session()
    a = [store.append_entry(s.id, msg(f"a{i}", i)).id for i in range(6)]
    store.append_compaction(s.id, "one", a[3], 100, timestamp=stamp(6))
    b = [store.append_entry(s.id, msg(f"b{i}", 7 + i)).id for i in range(2)]
    before = all_contexts(store, s.id)
    store.gc(s.id, compacted_older_than=30, now=NOW)
    store.append_compaction(s.id, "two", b[0], 100, timestamp=stamp(10))
    store.append_entry(s.id, msg("c", 11))
    before = all_contexts(store, s.id)
    store.gc(s.id, compacted_older_than=30, now=NOW)
    assert all_contexts(store, s.id) == before
    assert store.doctor().ok
    notes = store.conn.execute(
        "select source_patch_json from turns where source_patch_json is not null"
    ).fetchall()
    assert notes and all('"gc"' in n[0] for n in notes)
