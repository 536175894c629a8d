"""A new user's first hour (issue 15, item 10): terminal safety and polish of the views.

No control character of a transcript reaches the terminal, help examples read one a
line, Ctrl-C exits 130, shell completion is documented, history derives what imported
compactions lack, long trees fold, and export keeps the active leaf.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli


def run(runner: CliRunner, db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return runner.invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


class TestCtrlC:
    def test_ctrl_c_exits_130_and_stores_nothing(self, tmp_path: Path) -> None:
        import signal
        import subprocess
        import sys
        import time

        path = tmp_path / "long.jsonl"
        with path.open("w") as out:
            out.write(json.dumps({"type": "session", "version": 3, "id": "long"}) + "\n")
            for n in range(300_000):
                entry = {
                    "type": "message",
                    "id": f"m{n}",
                    "parentId": f"m{n - 1}" if n else None,
                    "message": {"role": "user", "content": f"message number {n} " * 4},
                }
                out.write(json.dumps(entry) + "\n")
        db = tmp_path / "s.db"
        argv = [sys.executable, "-m", "nexus_store", "--db", str(db), "--counter", "chars4"]
        proc = subprocess.Popen(
            [*argv, "import", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not Path(f"{db}-wal").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # inside the file's transaction
        assert proc.poll() is None, "the import ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "nothing of it was stored" in err
        assert "Traceback" not in err and "Aborted!" not in err
        with Store(db) as store:
            assert store.conn.execute("select count(*) from turns").fetchone()[0] == 0
            assert store.conn.execute("select count(*) from sessions").fetchone()[0] == 0


class TestShellCompletion:
    @pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
    def test_completion_script_as_documented(self, shell: str) -> None:
        import os
        import subprocess
        import sys

        docs = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
        assert f"_NEXUS_STORE_COMPLETE={shell}_source nexus-store" in docs
        exe = Path(sys.executable).parent / "nexus-store"
        result = subprocess.run(
            [str(exe)],
            env={**os.environ, "_NEXUS_STORE_COMPLETE": f"{shell}_source"},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "_NEXUS_STORE_COMPLETE" in result.stdout and "nexus-store" in result.stdout


class TestHelpExamples:
    def test_examples_are_one_command_a_line(self, runner: CliRunner) -> None:
        from nexus_store.cli import cli as root

        def walk(group: click.Group, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
            out = [prefix] if not prefix else []  # a sub-group lists its commands
            for name, command in group.commands.items():
                if isinstance(command, click.Group):
                    out += walk(command, (*prefix, name))
                else:
                    out.append((*prefix, name))
            return out

        for args in walk(root, ()):
            text = runner.invoke(root, [*args, "--help"], terminal_width=80).output
            assert "\\b" not in text, args  # a raw docstring shows click's marker
            lines = text.split("Example:\n", 1)[1].split("\n\n", 1)[0].splitlines()
            previous = ""
            for line in lines:
                assert line.count("nexus-store ") <= 1, (args, line)
                stripped = line.strip()
                assert "    " not in stripped, (args, line)  # a continuation run into the line
                assert stripped.startswith(("nexus-store ", "cat ")) or previous.endswith("\\"), (
                    args,
                    line,
                )
                previous = stripped


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\x9b1m\u202egnp.exe\x7f\x08"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f", "\x08")


class TestTerminalSafety:
    @pytest.fixture
    def db(self, tmp_path: Path) -> Path:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            s = store.create_session(id="esc", title=f"title {HOSTILE}", cwd=f"/r{HOSTILE}")
            first = store.append_message(s.id, {"role": "user", "content": f"find {HOSTILE}"})
            store.append_message(
                s.id,
                {
                    "role": "toolResult",
                    "toolCallId": "c",
                    "toolName": f"bash{HOSTILE}",
                    "content": [{"type": "text", "text": f"find out {HOSTILE}"}],
                },
            )
            store.append_entry(
                s.id, {"type": "label", "targetId": first.id, "label": f"lbl{HOSTILE}"}
            )
            store.append_compaction(s.id, f"find summary {HOSTILE}", first.id, 10)
        return db

    @pytest.mark.parametrize(
        "args",
        [
            ["sessions"],
            ["tree", "esc"],
            ["context", "show", "esc"],
            ["context", "inspect", "esc"],
            ["context", "history", "esc"],
            ["context", "status", "esc"],
            ["search", "find"],
            ["sql", "select title, cwd from sessions"],
            ["tree", "esc", "--json"],
            ["search", "find", "--json"],
            ["sql", "select title from sessions", "--nl"],
        ],
    )
    def test_no_control_character_reaches_the_terminal(
        self, runner: CliRunner, db: Path, args: list[str]
    ) -> None:
        result = run(runner, db, *args)
        assert result.exit_code == 0, result.output
        for char in RAW:
            assert char not in result.output, (args, char)
        if "--json" not in args and "--nl" not in args:
            shows_text = args[:2] not in (["context", "status"], ["context", "history"])
            assert "\\x1b" in result.output or not shows_text

    def test_errors_are_escaped_too(self, runner: CliRunner, db: Path) -> None:
        result = run(runner, db, "tree", f"nope{HOSTILE}")
        assert result.exit_code == 1
        assert not any(char in result.output for char in RAW)

    def test_import_problems_are_escaped(self, runner: CliRunner, tmp_path: Path) -> None:
        path = tmp_path / "bad.jsonl"
        path.write_text(
            json.dumps({"type": "session", "version": 3, "id": "bad"}) + "\n"
            + json.dumps({"type": "message", "id": f"x{HOSTILE}", "parentId": f"p{HOSTILE}",
                          "message": {"role": "user", "content": "hi"}}) + "\n"
        )  # fmt: skip
        result = run(runner, tmp_path / "s.db", "import", str(path))
        assert result.exit_code == 0 and "orphan" in result.output
        assert not any(char in result.output for char in RAW)


class TestHistoryDerives:
    def test_imported_compaction_shows_what_the_tree_knows(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        assert run(runner, db, "import", "--example", "-q").exit_code == 0
        text = run(runner, db, "context", "history", "latest").output
        assert "?" not in text and "14,800 → " in text and "* derived from the tree" in text
        (row,) = json.loads(run(runner, db, "context", "history", "latest", "--json").output)
        with Store(db) as store:
            session = store.resolve_session("latest").id
            at = store.context(session, "c1000001")
            before = store.context(session, "b1000009")
        assert row["tokens_before"] == 14_800 and "tokens_before" not in row["derived"]
        assert row["tokens_after"] == at.tokens
        assert row["messages_compacted"] == len(before.messages) - (len(at.messages) - 1)
        assert row["derived"] == ["tokens_after", "messages_compacted"]

    def test_recorded_values_are_not_derived(
        self, store: Store, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as s:
            x = s.create_session(id="n")
            first = s.append_message(x.id, {"role": "user", "content": "hello there"})
            s.append_compaction(x.id, "sum", first.id, 500, tokensAfter=40, messagesCompacted=3)
        (row,) = json.loads(run(runner, db, "context", "history", "n", "--json").output)
        assert (row["tokens_before"], row["tokens_after"], row["messages_compacted"]) == (
            500,
            40,
            3,
        )
        assert row["derived"] == []


class TestTreeFolds:
    @pytest.fixture
    def db(self, tmp_path: Path) -> tuple[Path, list[str], str]:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            s = store.create_session(id="long")
            with store.atomic():
                ids = [
                    store.append_message(s.id, {"role": "user", "content": f"m{i}"}).id
                    for i in range(1000)
                ]
            store.append_entry(s.id, {"type": "label", "targetId": ids[250], "label": "here"})
            branch = store.append_message(
                s.id, {"role": "user", "content": "b"}, parent_id=ids[500]
            ).id
        return db, ids, branch

    def test_a_1000_turn_session_is_folded(
        self, runner: CliRunner, db: tuple[Path, list[str], str]
    ) -> None:
        path, ids, branch = db
        out = run(runner, path, "tree", "long").output
        lines = out.splitlines()
        assert len(lines) < 40
        assert "turns folded (tree --all shows every turn)" in out
        for must in (ids[0], ids[250], ids[500], ids[501], ids[999], branch):
            assert must in out  # root, labelled, branch point, both tips
        assert f"{branch} message  user: b  ◀ active" in out
        assert ids[100] not in out

    def test_all_shows_every_turn_and_json_lists_them(
        self, runner: CliRunner, db: tuple[Path, list[str], str]
    ) -> None:
        path, ids, _ = db
        out = run(runner, path, "tree", "long", "--all").output
        assert all(i in out for i in ids) and "folded" not in out
        data = json.loads(run(runner, path, "tree", "long", "--json").output)
        assert len(data["turns"]) == 1002

    def test_short_runs_are_not_folded(self, runner: CliRunner, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        assert run(runner, db, "import", "--example", "-q").exit_code == 0
        assert "folded" not in run(runner, db, "tree", "latest").output


class TestExportKeepsTheActiveLeaf:
    def test_a_navigated_leaf_survives_export_and_import(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db, other = tmp_path / "a.db", tmp_path / "b.db"
        out = tmp_path / "out.jsonl"
        assert run(runner, db, "import", "--example", "-q").exit_code == 0
        assert run(runner, db, "navigate", "latest", "a1000008").exit_code == 0
        assert run(runner, db, "export", "latest", "-o", str(out)).exit_code == 0
        header = json.loads(out.read_text().splitlines()[0])
        assert header["nexusStore"] == {"activeLeafId": "a1000008"}
        assert run(runner, other, "import", str(out), "-q").exit_code == 0
        with Store(db) as a, Store(other) as b:
            sa, sb = a.resolve_session("latest"), b.resolve_session("latest")
            assert sb.active_leaf == "a1000008"
            assert b.context(sb.id).messages == a.context(sa.id).messages
        # moved back to the last entry: the key goes again, the file is the original
        assert run(runner, db, "navigate", "latest", "c1000007").exit_code == 0
        assert run(runner, db, "export", "latest", "-o", str(out)).exit_code == 0
        assert "nexusStore" not in json.loads(out.read_text().splitlines()[0])

    def test_an_imported_file_exports_unchanged(self, runner: CliRunner, tmp_path: Path) -> None:
        from nexus_store.examples import EXAMPLE_TRANSCRIPT

        db, out = tmp_path / "a.db", tmp_path / "out.jsonl"
        run(runner, db, "import", "--example", "-q")
        run(runner, db, "export", "latest", "-o", str(out))
        original = [json.loads(line) for line in EXAMPLE_TRANSCRIPT.read_text().splitlines()]
        assert [json.loads(line) for line in out.read_text().splitlines()] == original
