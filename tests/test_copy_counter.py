"""A destination with no sessions takes the source's counter (issue 18, item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import NexusError, Store
from nexus_store.cli import cli

pytest_plugins = ["tests.pg_server"]


def _source(path: Path) -> Path:
    with Store(path, counter="chars4") as store:
        sid = store.create_session(id="s").id
        store.append_message(sid, {"role": "user", "content": "x" * 40, "timestamp": 0})
    return path


class TestCopyCounter:
    def test_a_database_a_command_opened_first_still_takes_a_copy(
        self, tmp_path: Path, runner: CliRunner
    ) -> None:
        source = _source(tmp_path / "chars4.db")
        dest = tmp_path / "dest.db"
        # something opens it first: it records the default counter (cl100k_base)
        Store(dest).close()
        with Store(dest) as store:
            assert store.counter.name == "cl100k_base"
        result = runner.invoke(cli, ["copy", "--from", str(source), "--to", str(dest), "-q"])
        assert result.exit_code == 0, result.output
        with Store(dest) as store:
            assert store.counter.name == "chars4"
            assert store.context("s").tokens == 10  # the source's count, comparable
        # and resuming works for good
        again = runner.invoke(cli, ["copy", "--from", str(source), "--to", str(dest), "-q"])
        assert again.exit_code == 0, again.output

    def test_a_destination_with_sessions_keeps_its_counter(self, tmp_path: Path) -> None:
        source = _source(tmp_path / "chars4.db")
        with Store(tmp_path / "dest.db", counter="cl100k_base") as dest:
            dest.create_session(id="mine")
            with Store(source) as src, pytest.raises(NexusError, match="counter"):
                src.copy_to(dest)
            assert dest.counter.name == "cl100k_base"

    def test_postgresql_opened_first_takes_the_source_counter(
        self, tmp_path: Path, pg_url: str, runner: CliRunner
    ) -> None:
        source = _source(tmp_path / "chars4.db")
        assert runner.invoke(cli, ["--db", pg_url, "sessions"]).exit_code == 0
        result = runner.invoke(cli, ["copy", "--from", str(source), "--to", pg_url, "-q"])
        assert result.exit_code == 0, result.output
        with Store(pg_url) as store:
            assert store.counter.name == "chars4"
            assert [m["content"] for m in store.context("s").messages] == ["x" * 40]
