"""The command line: thin commands, JSON output that matches the library, clear errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.examples import EXAMPLE_TRANSCRIPT

SESSION = "0193a1c2-7d4e-7b21-9f00-5e55d0c0ffee"


@pytest.fixture
def db(tmp_path: Path, runner: CliRunner) -> Path:
    path = tmp_path / "cli.db"
    result = runner.invoke(
        cli, ["--db", str(path), "import", "--example", "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return path


def run(runner: CliRunner, db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return runner.invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


def all_commands() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name, command in group.commands.items():
            out.append((*prefix, name))
            if isinstance(command, click.Group):
                walk(command, (*prefix, name))

    walk(cli, ())
    return out


class TestReading:
    def test_import_summary_json(self, runner: CliRunner, tmp_path: Path) -> None:
        result = runner.invoke(
            cli, ["--db", str(tmp_path / "x.db"), "import", str(EXAMPLE_TRANSCRIPT), "--json"]
        )
        report = json.loads(result.output)
        assert report["turns"] == 29 and report["sessions"] == [SESSION] and report["errors"] == []

    def test_sessions_json(self, runner: CliRunner, db: Path) -> None:
        rows = json.loads(run(runner, db, "sessions", "--json").output)
        assert [r["id"] for r in rows] == [SESSION]
        assert rows[0]["title"] == "Fix due dates time zone"

    def test_tree_marks_the_active_leaf_and_draws_branches(
        self, runner: CliRunner, db: Path
    ) -> None:
        text = run(runner, db, "tree", "latest").output
        assert "c1000007 session_info" in text and "◀ active" in text.splitlines()[-1]
        assert "├─ a1000008" in text and "└─ b1000001 branch_summary" in text
        assert "[first attempt]" in text
        data = json.loads(run(runner, db, "tree", SESSION[:8], "--json").output)
        assert data["active_leaf"] == "c1000007" and len(data["turns"]) == 29

    def test_context_show_json_equals_the_library(self, runner: CliRunner, db: Path) -> None:
        shown = json.loads(run(runner, db, "context", "show", "latest", "--json").output)
        with Store(db) as store:
            assert shown == json.loads(json.dumps(store.context(SESSION).to_json_dict()))
        assert shown["messages"][0]["role"] == "compactionSummary"
        other = json.loads(
            run(runner, db, "context", "show", "latest", "--leaf", "a100000c", "--json").output
        )
        assert [m["role"] for m in other["messages"]][:2] == ["user", "assistant"]
        assert other["thinking_level"] == "low"

    def test_context_show_render(self, runner: CliRunner, db: Path) -> None:
        openai = json.loads(
            run(runner, db, "context", "show", "latest", "--render", "openai").output
        )
        assert openai[0]["role"] == "user" and "<summary>" in openai[0]["content"]
        assert any(m["role"] == "tool" for m in openai)
        anthropic = json.loads(
            run(runner, db, "context", "show", "latest", "--render", "anthropic").output
        )
        assert {m["role"] for m in anthropic} <= {"user", "assistant"}

    def test_context_status(self, runner: CliRunner, db: Path) -> None:
        data = json.loads(
            run(runner, db, "context", "status", "latest", "--window", "1000", "--json").output
        )
        assert data["compactions"] == 1 and data["window"] == 1000
        assert data["percent"] == round(data["tokens"] / 10, 2)
        text = run(runner, db, "context", "status", "latest").output
        assert "Compactions:     1 on this path" in text


class TestSql:
    def test_select(self, runner: CliRunner, db: Path) -> None:
        rows = json.loads(
            run(
                runner,
                db,
                "sql",
                "select kind, count(*) n from turns group by kind order by kind",
                "--json",
            ).output
        )
        assert {"kind": "compaction", "n": 1} in rows

    @pytest.mark.parametrize(
        "query",
        [
            "delete from turns",
            "update sessions set title = 'x'",
            "insert into settings values ('a', 'b')",
            "with x as (select 1) delete from turns",
            "attach database 'other.db' as o",
            "pragma writable_schema = 1",
            "select load_extension('x')",
            "vacuum into 'copy.db'",
            "drop table turns",
        ],
    )
    def test_writes_are_refused_and_the_file_is_unchanged(
        self, runner: CliRunner, db: Path, query: str
    ) -> None:
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        result = runner.invoke(cli, ["--db", str(db), "sql", query])
        assert result.exit_code == 1
        assert "read-only" in result.output and "not changed" in result.output
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before
        assert not (db.parent / "copy.db").exists()


class TestWriting:
    def test_export_then_import_is_idempotent(
        self, runner: CliRunner, db: Path, tmp_path: Path
    ) -> None:
        out = tmp_path / "out.jsonl"
        assert run(runner, db, "export", "latest", "-o", str(out)).exit_code == 0
        original = [json.loads(x) for x in EXAMPLE_TRANSCRIPT.read_text().splitlines()]
        assert [json.loads(x) for x in out.read_text().splitlines()] == original
        again = json.loads(run(runner, db, "import", str(out), "--json").output)
        assert again["turns"] == 0 and again["conflicts"] == 0

    def test_compact_dry_run_and_declined_write_nothing(self, runner: CliRunner, db: Path) -> None:
        before = hashlib.sha256(db.read_bytes()).hexdigest()
        result = run(runner, db, "compact", "latest", "--dry-run", "--keep-recent-tokens", "10")
        assert "Messages to summarize" in result.output
        result = run(runner, db, "compact", "latest", "--keep-recent-tokens", "10", input="n\n")
        assert "cancelled" in result.output
        assert hashlib.sha256(db.read_bytes()).hexdigest() == before

    def test_compact_yes_and_history(self, runner: CliRunner, db: Path) -> None:
        result = run(runner, db, "compact", "latest", "--keep-recent-tokens", "10", "--yes")
        assert result.exit_code == 0 and "Compacted" in result.output
        history = json.loads(run(runner, db, "context", "history", "latest", "--json").output)
        assert len(history) == 2 and history[1]["trigger"] == "manual"

    def test_navigate_and_summarize(self, runner: CliRunner, db: Path) -> None:
        result = json.loads(
            run(runner, db, "navigate", "latest", "a1000007", "--summarize", "--json").output
        )
        assert result["branch_summary"]["parent_id"] == "a1000007"
        assert result["session"]["active_leaf"] == result["branch_summary"]["id"]

    def test_backup_round_trip(self, runner: CliRunner, db: Path, tmp_path: Path) -> None:
        backup = tmp_path / "b.json"
        run(runner, db, "context", "export", "latest", str(backup))
        other = tmp_path / "other.db"
        assert (
            runner.invoke(cli, ["--db", str(other), "context", "import", str(backup)]).exit_code
            == 0
        )
        with Store(db) as a, Store(other) as b:
            assert [t.entry for t in a.iter_turns(SESSION)] == [
                t.entry for t in b.iter_turns(SESSION)
            ]
            assert a.get_session(SESSION).active_leaf == b.get_session(SESSION).active_leaf


class TestErrors:
    def test_unknown_session_is_one_line_and_exit_1(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(cli, ["--db", str(db), "tree", "nope"])
        assert result.exit_code == 1
        assert result.output.strip().splitlines() == [
            "Error: no session with id or id prefix 'nope'"
        ]

    def test_unknown_turn(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(cli, ["--db", str(db), "context", "show", "latest", "--leaf", "zzz"])
        assert result.exit_code == 1 and "zzz" in result.output

    def test_usage_error_is_exit_2(self, runner: CliRunner, db: Path) -> None:
        result = runner.invoke(
            cli, ["--db", str(db), "context", "status", "latest", "--window", "0"]
        )
        assert result.exit_code == 2

    def test_missing_database(self, runner: CliRunner, tmp_path: Path) -> None:
        result = runner.invoke(cli, ["--db", str(tmp_path / "none.db"), "sessions"])
        assert result.exit_code == 1 and "no database" in result.output
        assert not (tmp_path / "none.db").exists()

    def test_not_a_database(self, runner: CliRunner, tmp_path: Path) -> None:
        notes = tmp_path / "notes.txt"
        notes.write_text("my notes")
        result = runner.invoke(cli, ["--db", str(notes), "sessions"])
        assert result.exit_code == 1 and "not a SQLite database" in result.output
        assert notes.read_text() == "my notes"

    def test_env_var_chooses_the_database(
        self, runner: CliRunner, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("NEXUS_STORE_DB", str(db))
        result = runner.invoke(cli, ["sessions", "--json"])
        assert json.loads(result.output)[0]["id"] == SESSION


@pytest.mark.parametrize("command", all_commands(), ids=" ".join)
def test_every_command_has_help_with_an_example(
    runner: CliRunner, command: tuple[str, ...]
) -> None:
    result = runner.invoke(cli, [*command, "--help"])
    assert result.exit_code == 0
    target: click.Command = cli
    for name in command:
        target = target.commands[name]  # type: ignore[attr-defined]
    if not isinstance(target, click.Group):  # a group lists its commands; each has examples
        assert "Example:" in result.output, command
