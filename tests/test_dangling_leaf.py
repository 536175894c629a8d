"""A dangling active leaf is a clear error, never a TypeError or a misrouted append
(issue 18, item 6)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.engine import ContextEngine
from nexus_store.errors import DanglingLeaf


def _point_leaf(db: Path, session_id: str, key: int) -> None:
    """Set the active leaf behind the store's back (a hand edit; foreign keys off)."""
    conn = sqlite3.connect(db)
    conn.execute("update sessions set active_leaf_id = ? where uid = ?", [key, session_id])
    conn.commit()
    conn.close()


@pytest.fixture
def dangling_db(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    with Store(db, counter="chars4") as store:
        sid = store.create_session(id="s").id
        for n in range(3):
            store.append_message(sid, {"role": "user", "content": f"m{n}", "timestamp": n})
        other = store.create_session(id="other").id
        store.append_message(other, {"role": "user", "content": "elsewhere", "timestamp": 0})
    _point_leaf(db, "s", 999_999)
    return db


def _turn_count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("select count(*) from turns").fetchone()[0])
    finally:
        conn.close()


class TestDanglingLeaf:
    def test_reads_name_doctor_fix(self, dangling_db: Path) -> None:
        with Store(dangling_db) as store:
            for read in (
                lambda: store.context("s"),
                lambda: store.status("s"),
                lambda: store.path("s"),
                lambda: ContextEngine(store).assemble("s"),
                lambda: store.compact("s"),
            ):
                with pytest.raises(DanglingLeaf, match="doctor --fix"):
                    read()
            # an explicit leaf still reads
            first = store.iter_turns("s").__next__()
            assert store.context("s", leaf_id=first.id).messages[0]["content"] == "m0"

    def test_append_refuses_instead_of_starting_a_new_root(self, dangling_db: Path) -> None:
        before = _turn_count(dangling_db)
        with Store(dangling_db) as store:
            with pytest.raises(DanglingLeaf, match="doctor --fix"):
                store.append_message("s", {"role": "user", "content": "lost?", "timestamp": 9})
            # an explicit parent, or an explicit new root, is still the caller's choice
            first = store.iter_turns("s").__next__()
            store.append_message(
                "s", {"role": "user", "content": "child", "timestamp": 9}, parent_id=first.id
            )
        assert _turn_count(dangling_db) == before + 1

    def test_a_leaf_in_another_session_is_dangling_too(self, dangling_db: Path) -> None:
        conn = sqlite3.connect(dangling_db)
        other_leaf = conn.execute(
            "select t.id from turns t join sessions s on s.id = t.session_id where s.uid = 'other'"
        ).fetchone()[0]
        conn.close()
        _point_leaf(dangling_db, "s", other_leaf)
        with Store(dangling_db) as store:
            with pytest.raises(DanglingLeaf):
                store.append_message("s", {"role": "user", "content": "x", "timestamp": 9})
            with pytest.raises(DanglingLeaf):
                store.context("s")
            assert [m["content"] for m in store.context("other").messages] == ["elsewhere"]

    def test_cli_prints_one_line_and_doctor_fix_repairs(
        self, dangling_db: Path, runner: CliRunner
    ) -> None:
        for args in (["context", "show", "s"], ["context", "status", "s"]):
            result = runner.invoke(cli, ["--db", str(dangling_db), *args])
            assert result.exit_code == 1
            assert "Traceback" not in result.output
            assert len(result.output.strip().splitlines()) == 1
            assert "doctor --fix" in result.output
        fixed = runner.invoke(cli, ["--db", str(dangling_db), "doctor", "--fix"])
        assert fixed.exit_code == 0, fixed.output
        with Store(dangling_db) as store:
            assert [m["content"] for m in store.context("s").messages] == ["m0", "m1", "m2"]
            store.append_message("s", {"role": "user", "content": "m3", "timestamp": 3})
            assert store.context("s").messages[-1]["content"] == "m3"
