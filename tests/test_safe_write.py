"""Exports never follow a planted link and are private (issue 18, item 2)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.errors import NexusError
from nexus_store.safe_write import private_text_file

SECRET = "sk-or-v1-secret-in-transcript"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    with Store(path, counter="chars4") as store:
        sid = store.create_session(id="s").id
        store.append_message(sid, {"role": "user", "content": SECRET, "timestamp": 0})
    return path


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


EXPORTS = [
    ("export", lambda out: ["export", "s", "-o", str(out)]),
    ("context export", lambda out: ["context", "export", "s", str(out)]),
]


@pytest.mark.parametrize(("name", "args"), EXPORTS, ids=[e[0] for e in EXPORTS])
class TestExportFiles:
    def test_planted_partial_link_is_not_followed(
        self, db: Path, tmp_path: Path, runner: CliRunner, name: str, args: object
    ) -> None:
        victim = tmp_path / "victim"
        victim.write_text("precious\n")
        out = tmp_path / "out.jsonl"
        # the names a predictable writer would use, all planted
        for planted in (out.with_name(out.name + ".partial"), out.with_name(out.name + ".tmp")):
            planted.symlink_to(victim)
        result = runner.invoke(cli, ["--db", str(db), *args(out)])  # type: ignore[operator]
        assert result.exit_code == 0, result.output
        assert victim.read_text() == "precious\n"
        assert SECRET in out.read_text()
        assert not out.is_symlink()

    def test_link_at_the_target_is_replaced_not_written_through(
        self, db: Path, tmp_path: Path, runner: CliRunner, name: str, args: object
    ) -> None:
        victim = tmp_path / "victim"
        victim.write_text("precious\n")
        out = tmp_path / "out.jsonl"
        out.symlink_to(victim)
        result = runner.invoke(cli, ["--db", str(db), *args(out)])  # type: ignore[operator]
        assert result.exit_code == 0, result.output
        assert victim.read_text() == "precious\n"
        assert not out.is_symlink() and SECRET in out.read_text()

    def test_created_0600_even_under_umask_0(
        self, db: Path, tmp_path: Path, runner: CliRunner, open_umask: None, name: str, args: object
    ) -> None:
        out = tmp_path / "out.jsonl"
        result = runner.invoke(cli, ["--db", str(db), *args(out)])  # type: ignore[operator]
        assert result.exit_code == 0, result.output
        assert _mode(out) == 0o600
        # nothing left beside it
        assert not [p.name for p in tmp_path.iterdir() if "partial" in p.name]

    def test_replacing_an_existing_shared_file_makes_it_private(
        self, db: Path, tmp_path: Path, runner: CliRunner, name: str, args: object
    ) -> None:
        out = tmp_path / "out.jsonl"
        out.write_text("old")
        out.chmod(0o644)
        result = runner.invoke(cli, ["--db", str(db), *args(out)])  # type: ignore[operator]
        assert result.exit_code == 0, result.output
        assert _mode(out) == 0o600 and SECRET in out.read_text()


class TestPrivateTextFile:
    def test_a_failed_write_leaves_the_target_and_no_temporary(self, tmp_path: Path) -> None:
        out = tmp_path / "out.jsonl"
        out.write_text("before")
        with pytest.raises(RuntimeError), private_text_file(out) as handle:
            handle.write("half")
            raise RuntimeError("stop")
        assert out.read_text() == "before"
        assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]

    def test_missing_directory_is_one_clear_error(self, tmp_path: Path) -> None:
        with (
            pytest.raises(NexusError, match="does not exist"),
            private_text_file(tmp_path / "nowhere" / "out.jsonl"),
        ):
            pass

    def test_library_export_to_a_path_is_private(self, db: Path, tmp_path: Path) -> None:
        out = tmp_path / "lib.jsonl"
        with Store(db) as store:
            assert store.export_jsonl("s", out) == 2
        assert _mode(out) == 0o600
        assert json.loads(out.read_text().splitlines()[0])["id"] == "s"
