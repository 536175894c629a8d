"""A new user's first hour (issue 15): each item reproduced as the issue wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli


def run(runner: CliRunner, db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return runner.invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


def transcript(path: Path, session: str, stamps: list[str]) -> Path:
    """A pi v3 transcript: a header, then one user message per timestamp."""
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session, "timestamp": stamps[0]}
    ]
    parent = None
    for n, stamp in enumerate(stamps):
        uid = f"{session}-{n}"
        lines.append(
            {
                "type": "message",
                "id": uid,
                "parentId": parent,
                "timestamp": stamp,
                "message": {"role": "user", "content": f"message {n}", "timestamp": 0},
            }
        )
        parent = uid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def session_rows(db: Path) -> list[tuple[Any, ...]]:
    with Store(db) as store:
        return store.conn.execute("select * from sessions order by id").fetchall()


class TestLatestFollowsTheConversation:
    """Item 3: `latest` is the newest conversation; an import that adds nothing changes nothing."""

    def test_latest_is_the_newest_turn_not_the_last_file(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        recent = transcript(tmp_path / "recent.jsonl", "recent", ["2026-03-01T10:00:00.000Z"])
        old = transcript(tmp_path / "old.jsonl", "old", ["2025-01-01T10:00:00.000Z"])
        assert run(runner, db, "import", str(recent), "-q").exit_code == 0
        assert run(runner, db, "import", str(old), "-q").exit_code == 0  # imported last
        listed = json.loads(run(runner, db, "sessions", "--json").output)
        assert [s["id"] for s in listed] == ["recent", "old"]
        assert listed[0]["updated_utc"] == "2026-03-01T10:00:00.000Z"
        tree = json.loads(run(runner, db, "tree", "latest", "--json").output)
        assert tree["session"] == "recent"

    def test_reimport_of_an_unchanged_file_changes_nothing(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        path = transcript(
            tmp_path / "a.jsonl", "a", ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
        )
        assert run(runner, db, "import", str(path), "-q").exit_code == 0
        before = session_rows(db)
        result = run(runner, db, "import", str(path), "--json")
        assert json.loads(result.output)["turns"] == 0
        assert session_rows(db) == before

    def test_reimport_keeps_a_navigated_leaf(self, runner: CliRunner, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        path = transcript(
            tmp_path / "a.jsonl", "a", ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
        )
        run(runner, db, "import", str(path), "-q")
        assert run(runner, db, "navigate", "a", "a-0").exit_code == 0
        before = session_rows(db)
        run(runner, db, "import", str(path), "-q")
        assert session_rows(db) == before

    def test_a_longer_file_moves_updated_to_its_newest_turn(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        stamps = ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]
        run(runner, db, "import", str(transcript(tmp_path / "a.jsonl", "a", stamps[:1])), "-q")
        run(runner, db, "import", str(transcript(tmp_path / "a.jsonl", "a", stamps)), "-q")
        (session,) = json.loads(run(runner, db, "sessions", "--json").output)
        assert session["updated_utc"] == stamps[1] and session["turn_count"] == 2


class TestStatusRisk:
    """Item 4: risk and recommendation take the fill level and the trigger formula into account."""

    @pytest.fixture
    def full(self, tmp_path: Path) -> tuple[Path, str]:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            s = store.create_session(id="full")
            store.append_message(s.id, {"role": "user", "content": "x" * (208_931 * 4)})
        return db, s.id

    def test_overflowing_context_is_not_healthy(
        self, runner: CliRunner, full: tuple[Path, str]
    ) -> None:
        db, session = full
        out = run(runner, db, "context", "status", session).output
        assert "208,931 / 200,000 (104.5%)" in out
        assert "healthy" not in out
        assert "Degradation:     critical" in out and "does not fit" in out
        status = json.loads(run(runner, db, "context", "status", session, "--json").output)
        assert status["risk"] == "critical" and "compact" in status["recommendation"]

    @pytest.mark.parametrize(
        ("window", "risk", "words"),
        [
            (300_000, "low", "healthy"),  # 70%
            (250_000, "medium", "nearing"),  # 84%: past the lowest layer (80%)
            (220_000, "high", "trigger"),  # 95%: past 220,000 - 20,000 - 4,000
            (208_931, "critical", "does not fit"),  # exactly full
        ],
    )
    def test_fill_levels(self, full: tuple[Path, str], window: int, risk: str, words: str) -> None:
        db, session = full
        with Store(db) as store:
            status = store.status(session, window=window)
        assert status.risk == risk and words in status.recommendation

    def test_the_higher_risk_wins_and_both_are_said(self) -> None:
        from nexus_store.policy import CompactionConfig, evaluate_degradation

        cfg = CompactionConfig()
        d = evaluate_degradation(3, cfg, tokens=180_000)
        assert d.risk == "high"
        assert "trigger (176,000" in d.recommendation and "Compacted 3 times" in d.recommendation
        assert evaluate_degradation(5, cfg, tokens=10).risk == "critical"
        assert evaluate_degradation(0, cfg).risk == "low"  # no tokens: the count alone


# -- item 5: read-only places ----------------------------------------------------------

NOBODY = 65534


def _reader_python() -> list[str] | None:
    """An interpreter the unprivileged user can run, with this checkout importable.

    As root, permission bits do not stop writes, so a read-only file or folder is only
    real for another user: the commands then run as ``nobody`` through ``setpriv``.
    """
    import shutil
    import subprocess
    import sys
    import sysconfig

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    env_path = ":".join([str(Path(__file__).resolve().parents[1]), *sorted(paths)])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if exe is None:
            continue
        cmd = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        cmd += ["env", f"PYTHONPATH={env_path}", exe]
        probe = subprocess.run(
            [*cmd, "-c", "import nexus_store.cli"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return cmd
    return None


@pytest.fixture
def reader(tmp_path: Path) -> Any:
    """Run nexus-store as a user who can read but not write the prepared places."""
    import os
    import subprocess
    import sys
    import tempfile

    root = os.geteuid() == 0
    prefix = _reader_python() if root else [sys.executable]
    if prefix is None:
        pytest.skip("running as root without setpriv or a Python the user nobody can run")
    base = Path(tempfile.mkdtemp(prefix="nexus-ro-", dir="/tmp" if root else tmp_path))
    base.chmod(0o755)

    def make(kind: str) -> Path:
        folder = base / kind
        folder.mkdir()
        db = folder / "sessions.db"
        with Store(db, counter="chars4") as store:
            from nexus_store.examples import EXAMPLE_TRANSCRIPT

            store.import_jsonl(EXAMPLE_TRANSCRIPT)
        for sidecar in folder.glob("sessions.db-*"):
            sidecar.unlink()
        if kind == "folder":  # the file is the reader's, the folder is not writable
            if root:
                os.chown(db, NOBODY, NOBODY)
            folder.chmod(0o555)
        else:  # the folder is the reader's, the file is not writable
            if root:
                os.chown(folder, NOBODY, NOBODY)
            db.chmod(0o444)
        return db

    def run_cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, "-m", "nexus_store", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    yield make, run_cli
    for folder in base.iterdir():
        folder.chmod(0o755)
    import shutil

    shutil.rmtree(base, ignore_errors=True)


class TestReadOnlyPlaces:
    @pytest.mark.parametrize("kind", ["folder", "file"])
    def test_reading_works(self, reader: Any, kind: str) -> None:
        make, run_cli = reader
        db = make(kind)
        for args in (
            ["sessions", "--json"],
            ["tree", "latest"],
            ["context", "status", "latest"],
            ["search", "timezone"],
            ["sql", "select count(*) as n from turns", "--json"],
            ["schema", "turns"],
        ):
            result = run_cli(db, *args)
            assert result.returncode == 0, (args, result.stderr)
            assert "Traceback" not in result.stderr and "UserWarning" not in result.stderr
        out = run_cli(db, "sql", "select count(*) as n from turns", "--json").stdout
        assert json.loads(out) == [{"n": 29}]

    @pytest.mark.parametrize("kind", ["folder", "file"])
    def test_a_write_names_the_place_and_why(self, reader: Any, kind: str) -> None:
        make, run_cli = reader
        db = make(kind)
        before = db.read_bytes()
        result = run_cli(db, "navigate", "latest", "--root")
        assert result.returncode == 1
        (line,) = result.stderr.strip().splitlines()
        if kind == "folder":
            assert f"the folder {db.parent} is not writable" in line
        else:
            assert f"the file {db} is read-only" in line
        assert "nothing was changed" in line and "attempt to write" not in line
        assert db.read_bytes() == before
        sql = run_cli(db, "sql", "delete from turns")
        assert sql.returncode == 1 and "DELETE is refused" in sql.stderr

    def test_shared_database_warns_in_one_line(self, runner: CliRunner, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        assert run(runner, db, "import", "--example", "-q").exit_code == 0
        db.chmod(0o644)
        result = run(runner, db, "sessions")
        assert result.exit_code == 0
        assert result.stderr == (
            f"warning: {db} is readable by other users; transcripts hold secrets: chmod 600 {db}\n"
        )


class TestSqlReadsTheSchema:
    """Item 7: read pragmas and pragma functions work, errors are SQLite's, `schema` lists."""

    @pytest.fixture
    def db(self, runner: CliRunner, tmp_path: Path) -> Path:
        db = tmp_path / "s.db"
        assert run(runner, db, "import", "--example", "-q").exit_code == 0
        return db

    def test_pragma_table_info(self, runner: CliRunner, db: Path) -> None:
        result = run(runner, db, "sql", "pragma table_info('turns')", "--json")
        assert result.exit_code == 0, result.output
        names = [row["name"] for row in json.loads(result.output)]
        assert names[:3] == ["id", "session_id", "uid"]

    def test_table_valued_pragma_function(self, runner: CliRunner, db: Path) -> None:
        result = run(
            runner, db, "sql", "select name from pragma_table_info('turns') limit 2", "--json"
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output) == [{"name": "id"}, {"name": "session_id"}]
        idx = run(runner, db, "sql", "select * from pragma_index_list('turns')", "--json")
        assert idx.exit_code == 0 and json.loads(idx.output)

    def test_a_typo_is_sqlites_syntax_error(self, runner: CliRunner, db: Path) -> None:
        result = run(runner, db, "sql", "selec 1")
        assert result.exit_code == 1
        assert 'near "selec": syntax error' in result.output
        assert "refused" not in result.output
        missing = run(runner, db, "sql", "select * from nope")
        assert "no such table: nope" in missing.output

    @pytest.mark.parametrize(
        "query",
        [
            "pragma user_version = 7",
            "pragma journal_mode = delete",
            "select * from pragma_journal_mode('delete')",
            "update turns set kind = 'x'",
            "vacuum into '/tmp/x.db'",
        ],
    )
    def test_writes_stay_refused(self, runner: CliRunner, db: Path, query: str) -> None:
        before = db.read_bytes()
        result = run(runner, db, "sql", query)
        assert result.exit_code == 1
        assert db.read_bytes() == before

    def test_schema_lists_tables_columns_and_views(self, runner: CliRunner, db: Path) -> None:
        with Store(db) as store:
            store.conn.execute(
                "create view tool_results as select * from messages where role = 'toolResult'"
            )
        result = run(runner, db, "schema", "--json")
        assert result.exit_code == 0, result.output
        relations = {r["name"]: r for r in json.loads(result.output)}
        assert {"sessions", "turns", "messages", "messages_fts", "tool_results"} <= set(relations)
        assert "messages_fts_data" not in relations  # FTS5's storage
        assert relations["tool_results"]["type"] == "view"
        assert relations["messages_fts"]["type"] == "virtual table"
        uid = next(c for c in relations["turns"]["columns"] if c["name"] == "uid")
        assert uid == {
            "name": "uid",
            "type": "TEXT",
            "not_null": True,
            "primary_key": False,
            "default": None,
        }
        text = run(runner, db, "schema", "sessions").output
        assert text.startswith("table sessions\n") and "  id " in text and "primary key" in text
        assert run(runner, db, "schema", "nope").exit_code == 1


class TestProgressInsideAFile:
    """Item 6: the progress callback reports bytes within one large file as it goes."""

    def test_bytes_move_inside_one_file(self, tmp_path: Path) -> None:
        stamps = [f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z" for n in range(3000)]
        path = transcript(tmp_path / "big.jsonl", "big", stamps)
        size = path.stat().st_size
        seen: list[tuple[int, int]] = []
        with Store(tmp_path / "s.db", counter="chars4") as store:
            report = store.import_paths([path], progress=lambda b, e: seen.append((b, e)))
        assert report.turns == 3000
        inside = [b for b, _ in seen if 0 < b < size]
        assert len(inside) >= 3  # reported while the file was being read
        assert [b for b, _ in seen] == sorted(b for b, _ in seen)  # never backwards
        assert seen[-1] == (size, 3000)


class TestGcAsks:
    """Item 8: gc asks before it deletes (or takes --yes); --dry-run speaks in the conditional."""

    @pytest.fixture
    def branchy(self, tmp_path: Path) -> tuple[Path, str]:
        try:
            from tests.test_gc import _branchy
        except ImportError:
            from test_gc import _branchy  # type: ignore[no-redef]

        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            sid, _, _ = _branchy(store)
        return db, sid

    @staticmethod
    def turns(db: Path) -> int:
        with Store(db) as store:
            return int(store.conn.execute("select count(*) from turns").fetchone()[0])

    def test_declining_removes_nothing(self, runner: CliRunner, branchy: tuple[Path, str]) -> None:
        db, sid = branchy
        before = self.turns(db)
        result = run(runner, db, "gc", sid, "--dead-branches-older-than", "30", input="n\n")
        assert result.exit_code == 1
        assert "would remove: 3 dead-branch turns" in result.output
        assert "Remove these rows for good?" in result.output
        assert "nothing was removed" in result.output
        assert self.turns(db) == before

    def test_no_answer_removes_nothing(self, runner: CliRunner, branchy: tuple[Path, str]) -> None:
        db, sid = branchy
        before = self.turns(db)
        result = run(runner, db, "gc", sid, "--dead-branches-older-than", "30")  # stdin closed
        assert result.exit_code == 1 and self.turns(db) == before

    def test_confirming_removes(self, runner: CliRunner, branchy: tuple[Path, str]) -> None:
        db, sid = branchy
        before = self.turns(db)
        result = run(runner, db, "gc", sid, "--dead-branches-older-than", "30", input="y\n")
        assert result.exit_code == 0, result.output
        assert "removed: 3 dead-branch turns" in result.output
        assert self.turns(db) == before - 3

    def test_yes_skips_the_question(self, runner: CliRunner, branchy: tuple[Path, str]) -> None:
        db, sid = branchy
        result = run(runner, db, "gc", sid, "--dead-branches-older-than", "30", "--yes")
        assert result.exit_code == 0 and "?" not in result.output
        assert "removed: 3 dead-branch turns" in result.output

    def test_dry_run_is_conditional(self, runner: CliRunner, branchy: tuple[Path, str]) -> None:
        db, sid = branchy
        before = self.turns(db)
        out = run(runner, db, "gc", sid, "--dead-branches-older-than", "30", "--dry-run").output
        assert out.startswith("would remove: 3 dead-branch turns")
        for word in ("removed:", "re-rooted", "kept session", "did:"):
            assert word not in out
        assert self.turns(db) == before

    def test_nothing_to_remove_does_not_ask(
        self, runner: CliRunner, branchy: tuple[Path, str]
    ) -> None:
        db, sid = branchy
        result = run(runner, db, "gc", sid, "--dead-branches-older-than", "100000")
        assert result.exit_code == 0 and "nothing to remove" in result.output
        assert "?" not in result.output


class TestShortIds:
    """Item 9: an ambiguous id prefix lists the sessions it could mean."""

    def test_ambiguous_prefix_lists_the_candidates(self, runner: CliRunner, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            main = store.create_session(id="d6a37ffc-main", title="the main session")
            store.create_session(id="d6a37ffc-agent-1", parent_session=main.id, cwd="/repo")
            store.create_session(id="d6a37ffc-agent-2", parent_session=main.id)
        result = run(runner, db, "tree", "d6a37ffc")
        assert result.exit_code == 1
        line = result.output.strip()
        assert "is the prefix of several sessions" in line and len(line.splitlines()) == 1
        for candidate in (
            "d6a37ffc-agent-1 (/repo)",
            "d6a37ffc-agent-2",
            "d6a37ffc-main (the main session)",
        ):
            assert candidate in line
        assert (
            json.loads(run(runner, db, "tree", "d6a37ffc-m", "--json").output)["session"]
            == "d6a37ffc-main"
        )

    def test_many_candidates_are_cut(self, store: Store) -> None:
        from nexus_store import SessionNotFound

        for n in range(12):
            store.create_session(id=f"same-{n:02d}")
        with pytest.raises(SessionNotFound) as err:
            store.resolve_session("same")
        assert "same-09" in str(err.value) and "same-10" not in str(err.value)
        assert str(err.value).count("same-") == 10 and ", ..." in str(err.value)


# -- item 10: terminal safety and polish ---------------------------------------------------


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
