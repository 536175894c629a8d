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
        from nexus_store.compaction.policy import CompactionConfig, evaluate_degradation

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
