"""`Store.doctor` and ``nexus-store doctor``: each corruption made on purpose is found,
and ``--fix`` repairs only what is safe, saying what it did."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from tests.reliability_helpers import all_contexts, msg, raw


def _populated(path: Path) -> tuple[str, list[str]]:
    with Store(path, counter="chars4") as store:
        s = store.create_session()
        ids = [store.append_entry(s.id, msg(f"turn {i} " * 5, i)).id for i in range(8)]
        ids.append(store.append_compaction(s.id, "summary", ids[5], 500).id)
        ids += [store.append_entry(s.id, msg(f"after {i}", 9 + i)).id for i in range(3)]
        store.append_entry(s.id, msg("branch", 20, parentId=ids[3]))
        store.navigate(s.id, ids[-1])
        store.create_session()  # a second, empty session
    return s.id, ids


def _doctor(path: Path, *, fix: bool = False, **kw: int):  # type: ignore[no-untyped-def]
    with Store(path) as store:
        return store.doctor(fix=fix, **kw)


def test_clean_database_is_ok(store_path: Path) -> None:
    _populated(store_path)
    report = _doctor(store_path)
    assert report.ok and report.findings == [] and report.turns_checked == 13
    assert report.wal_bytes is not None


def test_in_memory_store(store: Store) -> None:
    s = store.create_session()
    store.append_entry(s.id, msg("hi"))
    report = store.doctor(fix=True)
    assert report.ok and report.wal_bytes is None


@pytest.mark.parametrize(
    ("column", "value", "at"),
    [
        ("depth", 99, 4),
        ("path_tokens", 1, 2),
        ("context_tokens", 7, 10),  # after the compaction
        ("context_tokens", 7, 8),  # the compaction itself
        ("compaction_id", None, 10),
        ("compaction_count", 5, 9),
        ("run_start_seq", 3, 6),
        ("run_parent_id", 1, 6),
    ],
)
def test_wrong_path_value_is_found_and_recomputed(
    store_path: Path, column: str, value: int | None, at: int
) -> None:
    sid, ids = _populated(store_path)
    with Store(store_path) as store:
        before = all_contexts(store, sid)
        status = store.status(sid)
    conn = raw(store_path)
    conn.execute(f"update turns set {column} = ? where uid = ?", [value, ids[at]])  # test-only SQL
    conn.close()
    report = _doctor(store_path)
    assert not report.ok
    found = [f for f in report.findings if f.check == "path_values"]
    assert found and found[0].turn == ids[at] and found[0].session == sid
    assert column in found[0].message and found[0].fixable
    fixed = _doctor(store_path, fix=True)
    assert fixed.ok, fixed.findings
    assert any("recomputed path values" in a for a in fixed.actions)
    assert all(f.fixed for f in fixed.findings)
    with Store(store_path) as store:
        assert all_contexts(store, sid) == before
        assert store.status(sid) == status
    assert _doctor(store_path).findings == []


def test_missing_active_leaf_moves_to_latest_turn(store_path: Path) -> None:
    sid, _ids = _populated(store_path)
    conn = raw(store_path)  # foreign keys are off on a plain connection
    conn.execute("update sessions set active_leaf_id = 9999 where uid = ?", [sid])
    conn.close()
    report = _doctor(store_path)
    checks = {f.check for f in report.findings}
    assert {"active_leaf", "foreign_key"} <= checks and not report.ok
    leaf = next(f for f in report.findings if f.check == "active_leaf")
    assert leaf.session == sid and "does not exist" in leaf.message
    fixed = _doctor(store_path, fix=True)
    assert fixed.ok, fixed.findings
    with Store(store_path) as store:
        latest = max(store.iter_turns(sid), key=lambda t: t.seq)
        assert store.get_session(sid).active_leaf == latest.id
    assert any("moved the active leaf" in a for a in fixed.actions)


def test_active_leaf_of_another_session(store_path: Path) -> None:
    sid, _ids = _populated(store_path)
    with Store(store_path) as store:
        other = store.create_session()
        theirs = store.append_entry(other.id, msg("theirs")).id
    conn = raw(store_path)
    conn.execute(
        "update sessions set active_leaf_id = (select id from turns where uid = ?) where uid = ?",
        [theirs, sid],
    )
    conn.close()
    report = _doctor(store_path)
    assert [f.session for f in report.findings if f.check == "active_leaf"] == [sid]
    assert "another session" in report.findings[0].message
    assert _doctor(store_path, fix=True).ok


def test_token_count_mismatch_is_reported_not_fixed(store_path: Path) -> None:
    _sid, ids = _populated(store_path)
    conn = raw(store_path)
    conn.execute(
        "update messages set tokens = tokens + 3 "
        "where turn_id = (select id from turns where uid = ?)",
        [ids[1]],
    )
    conn.close()
    report = _doctor(store_path, fix=True)
    bad = [f for f in report.findings if f.check == "tokens"]
    assert bad and bad[0].turn == ids[1] and not bad[0].fixable and not bad[0].fixed
    assert not report.ok


def test_dangling_parent_is_a_foreign_key_finding(store_path: Path) -> None:
    _sid, ids = _populated(store_path)
    conn = raw(store_path)
    conn.execute("update turns set parent_id = 4242 where uid = ?", [ids[2]])
    conn.close()
    report = _doctor(store_path, fix=True)
    assert any(f.check == "foreign_key" and "turns" in f.message for f in report.findings)
    assert not report.ok  # not safe to guess a parent: left for a person


def test_large_wal_is_checkpointed(store_path: Path) -> None:
    with Store(store_path) as store:  # the last close checkpoints: write with this one open
        s = store.create_session()
        for i in range(20):
            store.append_entry(s.id, msg(f"turn {i}"))
        report = store.doctor(wal_limit=1000)
        assert [f.check for f in report.findings] == ["wal"]
        fixed = store.doctor(fix=True, wal_limit=1000)
        assert fixed.ok and fixed.wal_bytes == 0
        assert any("checkpointed the WAL" in a for a in fixed.actions)


def test_files_readable_by_others(store_path: Path) -> None:
    _populated(store_path)
    os.chmod(store_path, 0o644)
    with pytest.warns(UserWarning, match="readable by other users"):
        store = Store(store_path)
    with store:
        report = store.doctor()
        perms = [f for f in report.findings if f.check == "permissions"]
        assert perms and perms[0].turn == store_path.name and "644" in perms[0].message
        assert store.doctor(fix=True).ok
    assert stat.S_IMODE(store_path.stat().st_mode) == 0o600


def test_corrupt_index_fails_integrity_check(store_path: Path) -> None:
    sid, _ids = _populated(store_path)
    with Store(store_path) as store:
        for i in range(300):
            store.append_entry(sid, msg(f"filler {i}"))
    conn = raw(store_path)
    conn.execute("pragma wal_checkpoint(truncate)")
    page_size = conn.execute("pragma page_size").fetchone()[0]
    root = conn.execute(
        "select rootpage from sqlite_master where name = 'turns_session_seq'"
    ).fetchone()[0]
    conn.close()
    with store_path.open("r+b") as handle:  # scribble over the index's cells
        handle.seek((root - 1) * page_size + page_size // 2)
        handle.write(b"\x00\xff" * (page_size // 8))
    report = _doctor(store_path)
    assert not report.ok
    assert any(f.check == "integrity" for f in report.findings), report.findings


class TestCli:
    def test_ok_exits_0(self, runner: CliRunner, store_path: Path) -> None:
        _populated(store_path)
        result = runner.invoke(cli, ["--db", str(store_path), "doctor"], catch_exceptions=False)
        assert result.exit_code == 0 and result.output.startswith("ok: 13 turns checked")

    def test_problem_exits_1_and_fix_says_what_it_did(
        self, runner: CliRunner, store_path: Path
    ) -> None:
        _sid, ids = _populated(store_path)
        conn = raw(store_path)
        conn.execute("update turns set depth = 0 where uid = ?", [ids[3]])
        conn.close()
        args = ["--db", str(store_path), "doctor", "--json"]
        result = runner.invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 1
        body = json.loads(result.output)
        assert body["ok"] is False and body["findings"][0]["turn"] == ids[3]
        result = runner.invoke(cli, [*args[:-1], "--fix"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "[fixed] path_values" in result.output and "did: session" in result.output
