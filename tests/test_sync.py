"""Sync of JSONL transcripts from checkpoints, 'not a transcript', Claude Code usage once."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.sync import default_sources, sync_paths
from tests.reference import reference_context

pytest_plugins = ["tests.pg_server"]


def _pi_lines(session: str, start: int, count: int, parent: str | None) -> list[dict]:
    out = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        message: dict = {"role": role, "content": f"{role} {n}", "timestamp": 1_700_000_000_000 + n}
        if role == "assistant":
            message = {
                **message,
                "content": [{"type": "text", "text": f"a {n}"}],
                "provider": "p",
                "model": "m",
            }
        entry = {
            "type": "message",
            "id": f"{session}-{n}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": message,
        }
        out.append(entry)
        parent = entry["id"]
    return out


def _write(path: Path, objs: list[dict], mode: str = "a") -> int:
    data = "".join(json.dumps(o) + "\n" for o in objs).encode()
    with open(path, mode + "b") as f:
        f.write(data)
    return len(data)


def _header(session: str) -> dict:
    return {
        "type": "session",
        "version": 3,
        "id": session,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/r",
    }


def _all_entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    for n in range(3):
        path = root / f"s{n}.jsonl"
        _write(path, [_header(f"s{n}"), *_pi_lines(f"s{n}", 0, 6, None)], "w")
    return root


class TestCheckpoints:
    def test_unchanged_files_cost_one_stat_and_no_read(
        self, tree: Path, tmp_path: Path, monkeypatch
    ) -> None:
        with Store(tmp_path / "s.db", counter="chars4") as store:
            first = sync_paths(store, [tree])
            assert (first.new, first.turns) == (3, 18)

            def no_reads(*args, **kwargs):
                raise AssertionError("an unchanged source was opened")

            monkeypatch.setattr(os, "open", no_reads)
            monkeypatch.setattr("builtins.open", no_reads)
            again = sync_paths(store, [tree])
            assert (again.unchanged, again.turns, again.bytes, again.entries) == (3, 0, 0, 0)

    def test_a_grown_file_costs_its_new_bytes(self, tree: Path, tmp_path: Path) -> None:
        path = tree / "s1.jsonl"
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            added = _write(path, _pi_lines("s1", 6, 4, "s1-5"))
            report = sync_paths(store, [tree])
            assert (report.grown, report.unchanged, report.turns, report.bytes) == (1, 2, 4, added)
            entries = _all_entries(path)
            assert store.context("s1").messages == reference_context(entries, "s1-9")["messages"]

    def test_a_half_written_line_waits_for_its_end(self, tree: Path, tmp_path: Path) -> None:
        path = tree / "s0.jsonl"
        line = json.dumps(_pi_lines("s0", 6, 1, "s0-5")[0]) + "\n"
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            with open(path, "a") as f:
                f.write(line[:40])
            partial = sync_paths(store, [tree])
            assert (partial.turns, partial.skipped, partial.problems) == (0, 0, [])
            with open(path, "a") as f:
                f.write(line[40:])
            done = sync_paths(store, [tree])
            assert (done.turns, done.skipped) == (1, 0)

    def test_a_truncated_file_is_reread_with_a_report(self, tree: Path, tmp_path: Path) -> None:
        path = tree / "s2.jsonl"
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            _write(path, [_header("s2"), *_pi_lines("s2", 0, 3, None)], "w")
            report = sync_paths(store, [tree])
            assert len(report.reread) == 1 and "truncated" in report.reread[0]
            assert report.turns == 0 and report.conflicts == 0
            assert len(store.get_session("s2").id) and len(list(store.iter_turns("s2"))) == 6

    def test_a_rewritten_file_is_reread_never_appended_to(self, tree: Path, tmp_path: Path) -> None:
        path = tree / "s2.jsonl"
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            entries = _pi_lines("s2", 0, 6, None)
            entries[1]["message"]["content"] = [{"type": "text", "text": "b 1"}]  # same size
            _write(path, [_header("s2"), *entries], "w")
            _write(path, _pi_lines("s2", 6, 2, "s2-5"))
            report = sync_paths(store, [tree])
            assert len(report.reread) == 1 and "rewritten" in report.reread[0]
            assert report.conflicts == 1  # the changed entry is reported, not overwritten
            assert report.turns == 2
            assert store.get_turn("s2", "s2-1").entry["message"]["content"][0]["text"] == "a 1"

    def test_a_deleted_source_keeps_its_sessions(self, tree: Path, tmp_path: Path) -> None:
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            (tree / "s0.jsonl").unlink()
            report = sync_paths(store, [tree])
            assert len(report.missing) == 1 and "s0.jsonl" in report.missing[0]
            assert len(list(store.iter_turns("s0"))) == 6

    def test_second_sync_after_growth_adds_nothing(self, tree: Path, tmp_path: Path) -> None:
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [tree])
            _write(tree / "s0.jsonl", _pi_lines("s0", 6, 2, "s0-5"))
            sync_paths(store, [tree])
            report = sync_paths(store, [tree])
            assert (report.turns, report.unchanged) == (0, 3)


def _cc_line(uuid: str, parent: str | None, *, msg_id: str, request: str, text: str) -> dict:
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "cc1",
        "requestId": request,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {
            "id": msg_id,
            "role": "assistant",
            "model": "claude",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 100, "output_tokens": 7},
        },
    }


def _usage_sum(store: Store) -> int:
    return store.conn.execute("select coalesce(sum(input_tokens), 0) from messages").fetchone()[0]


class TestClaudeCodeUsageOnce:
    def test_split_and_repeated_responses_count_once_across_syncs(self, tmp_path: Path) -> None:
        path = tmp_path / "cc1.jsonl"
        user = {
            "type": "user",
            "uuid": "u0",
            "parentUuid": None,
            "sessionId": "cc1",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "hi"},
        }
        _write(path, [user, _cc_line("a1", "u0", msg_id="m1", request="r1", text="one")], "w")
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [path])
            # the rest of the split response, and the same piece written again, after the checkpoint
            _write(
                path,
                [
                    _cc_line("a2", "a1", msg_id="m1", request="r1", text="two"),
                    _cc_line("a3", "a2", msg_id="m1", request="r1", text="one"),
                    _cc_line("a4", "a3", msg_id="m2", request="r2", text="next"),
                ],
            )
            report = sync_paths(store, [path])
            assert report.grown == 1 and report.turns == 3
            assert _usage_sum(store) == 200  # m1 once, m2 once
        with Store(tmp_path / "whole.db", counter="chars4") as whole:
            whole.import_jsonl(path)
            assert _usage_sum(whole) == 200  # a whole-file import agrees


class TestNotATranscript:
    @pytest.mark.parametrize(
        ("name", "data", "why"),
        [
            ("blob.jsonl", bytes(range(256)) * 4, "binary file"),
            ("old.jsonl.gz", gzip.compress(b'{"type":"session"}\n'), "an archive (gzip)"),
            ("README.md", b"# Sessions\n\nThese are my sessions.\n", "a README"),
            ("notes.jsonl", b"just some words\nand more\n", "text with no JSON object line"),
        ],
    )
    def test_reported_with_why_and_no_session(
        self, tmp_path: Path, runner, name: str, data: bytes, why: str
    ) -> None:
        path = tmp_path / name
        path.write_bytes(data)
        db = tmp_path / "x.db"
        result = runner.invoke(cli, ["--db", str(db), "import", str(path)])
        assert result.exit_code == 1
        assert f"not a transcript: {path} ({why})" in result.output
        result = runner.invoke(cli, ["--db", str(db), "sync", str(path), "--json"])
        assert result.exit_code == 0
        assert json.loads(result.output)["not_transcripts"] == [f"not a transcript: {path} ({why})"]
        with Store(db) as store:
            assert store.list_sessions() == []

    def test_an_empty_folder(self, tmp_path: Path, runner) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        (empty / "README").write_text("nothing here")
        result = runner.invoke(cli, ["--db", str(tmp_path / "x.db"), "import", str(empty)])
        assert result.exit_code == 1
        assert f"not a transcript: {empty} (no transcript files in it)" in result.output

    def test_a_folder_with_one_good_file_imports_it(
        self, tree: Path, tmp_path: Path, runner
    ) -> None:
        (tree / "junk.jsonl").write_bytes(b"\x00\x01\x02" * 100)
        result = runner.invoke(cli, ["--db", str(tmp_path / "x.db"), "import", str(tree), "--json"])
        assert result.exit_code == 0
        report = json.loads(result.output)
        assert len(report["sessions"]) == 3 and len(report["not_transcripts"]) == 1

    def test_a_file_whose_format_is_not_known_yet_waits_for_more_lines(
        self, tmp_path: Path
    ) -> None:
        # One unrecognized object line: stored now under a guessed format (pi), the file
        # would become a second session once its NDJSON lines show which format it is.
        path = tmp_path / "events.ndjson"
        path.write_text('{"id": "o0", "type": "note"}\n')
        with Store(tmp_path / "x.db", counter="chars4") as store:
            report = sync_paths(store, [path])
            assert report.not_transcripts == [
                f"not a transcript: {path} (no line recognized yet; looked at again as it grows)"
            ]
            assert store.list_sessions() == []
            with path.open("a") as f:
                f.write('{"type": "message", "role": "user", "content": "hi", "timestamp": 1}\n')
            report = sync_paths(store, [path])
            assert report.errors == [] and report.not_transcripts == []
            sessions = store.list_sessions()
            assert len(sessions) == 1
            assert sessions[0].source_format == "ndjson"
            messages = store.context(sessions[0].id).messages
            assert [(m["role"], m["content"]) for m in messages] == [("user", "hi")]


class TestDefaults:
    def test_each_tool_location_and_its_override(self, tmp_path: Path) -> None:
        home = tmp_path / "home"
        for sub in (
            ".claude/projects",
            ".codex/sessions",
            "pi/sessions",
            ".openclaw/agents/main/sessions",
        ):
            (home / sub).mkdir(parents=True)
        (home / ".openclaw/agents/main/agent").mkdir(parents=True)
        (home / ".openclaw/agents/main/agent/openclaw-agent.sqlite").write_bytes(b"")
        found = default_sources({"PI_CODING_AGENT_DIR": str(home / "pi")}, home)
        assert found == [
            home / ".claude/projects",
            home / ".codex/sessions",
            home / "pi/sessions",
            home / ".openclaw/agents/main/sessions",
            home / ".openclaw/agents/main/agent/openclaw-agent.sqlite",
        ]
        assert default_sources({"NEXUS_STORE_SYNC_PATHS": f"/a{os.pathsep}/b"}, home) == [
            Path("/a"),
            Path("/b"),
        ]


APPENDER = textwrap.dedent(
    """
    import json, random, sys, time
    path, count = sys.argv[1], int(sys.argv[2])
    parent = "s0-5"
    random.seed(7)
    with open(path, "ab", buffering=0) as f:
        for n in range(count):
            entry = {"type": "message", "id": f"w{n}", "parentId": parent,
                     "timestamp": "2026-01-01T00:00:00.000Z",
                     "message": {"role": "user", "content": "x" * random.randint(1, 3000), "timestamp": 0}}
            data = (json.dumps(entry) + "\\n").encode()
            cut = random.randint(1, len(data) - 1)
            f.write(data[:cut]); time.sleep(0.0005); f.write(data[cut:])  # half lines happen
            parent = entry["id"]
    """
)


@pytest.mark.slow
def test_a_concurrent_appender_loses_and_duplicates_nothing(tree: Path, tmp_path: Path) -> None:
    count = 1500
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, str(tree / "s0.jsonl"), str(count)])
    with Store(tmp_path / "s.db", counter="chars4") as store:
        syncs = 0
        while writer.poll() is None:
            report = sync_paths(store, [tree])
            assert (report.errors, report.skipped, report.reread) == ([], 0, [])
            syncs += 1
        assert writer.wait() == 0
        sync_paths(store, [tree])
        rows = store.conn.execute(
            "select count(*), count(distinct t.uid) from turns t join sessions s on s.id = t.session_id "
            "where s.uid = 's0' and t.uid like 'w%'"
        ).fetchone()
        assert tuple(rows) == (count, count) and syncs > 2
        entries = _all_entries(tree / "s0.jsonl")
        assert (
            store.context("s0").messages == reference_context(entries, f"w{count - 1}")["messages"]
        )


@pytest.mark.slow
def test_watch_follows_appends_until_interrupted(tree: Path, tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nexus_store",
            "--db",
            str(db),
            "sync",
            "--watch",
            "--debounce",
            "50",
            "--json",
            str(tree),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def line() -> dict:
        import selectors

        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=60), "no sync reported within 60 s"
        return json.loads(proc.stdout.readline())

    try:
        first = line()
        assert first["turns"] == 18
        _write(tree / "s1.jsonl", _pi_lines("s1", 6, 2, "s1-5"))
        second = line()
        assert second["turns"] == 2 and second["grown"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.returncode == 0


class TestOnPostgres:
    def test_sync_and_openclaw_lineage_on_postgres(
        self, tree: Path, tmp_path: Path, pg_url: str
    ) -> None:
        from tests import openclaw_db

        database = tmp_path / "openclaw-agent.sqlite"
        conn = openclaw_db.create(database, 23)
        openclaw_db.add_window(conn, "o1")
        openclaw_db.add_events(
            conn,
            "o1",
            [openclaw_db.header("o1"), *openclaw_db.conversation("o1-", 2)],
            compress=True,
        )
        openclaw_db.add_window(conn, "o2", previous="o1", reason="rollover", created_at=5)
        openclaw_db.add_events(
            conn, "o2", [openclaw_db.header("o2"), *openclaw_db.conversation("o2-", 1)]
        )
        conn.close()
        with Store(pg_url, counter="chars4") as store:
            first = sync_paths(store, [tree, database])
            assert first.errors == [] and first.new == 4 and first.turns == 18 + 4 + 2
            _write(tree / "s0.jsonl", _pi_lines("s0", 6, 2, "s0-5"))
            again = sync_paths(store, [tree, database])
            assert (again.grown, again.unchanged, again.turns) == (1, 3, 2)
            row = store.conn.execute(
                "select l.reason, p.uid from sessions s join session_lineage l on l.session_id = s.id "
                "join sessions p on p.id = s.parent_session_id where s.uid = 'o2'"
            ).fetchone()
            assert tuple(row) == ("rollover", "o1")


def test_another_programs_sqlite_is_not_a_transcript(tmp_path: Path, runner) -> None:
    import sqlite3

    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("create table notes (x)")
    conn.close()
    result = runner.invoke(cli, ["--db", str(tmp_path / "x.db"), "import", str(other)])
    assert result.exit_code == 1
    assert (
        f"not a transcript: {other} (an SQLite database that is not an OpenClaw agent database)"
        in result.output
    )
