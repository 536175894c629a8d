"""OpenClaw's own SQLite store as a source of import and sync (schema versions 19 and 23)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.store.openclaw_source import OpenClawStore, UnknownSchemaVersion
from nexus_store.sync import sync_paths
from tests import openclaw_db
from tests.reference import reference_context


def _build(tmp_path: Path, version: int, *, compress: bool = False) -> Path:
    path = tmp_path / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    conn = openclaw_db.create(path, version)
    first = openclaw_db.conversation("s1-", 6, compact_at=3)
    second = openclaw_db.conversation("s2-", 3)
    openclaw_db.add_window(conn, "s1", created_at=1)
    openclaw_db.add_events(conn, "s1", [openclaw_db.header("s1"), *first], compress=compress)
    openclaw_db.add_window(conn, "s2", previous="s1", reason="reset", created_at=2)
    openclaw_db.add_events(conn, "s2", [openclaw_db.header("s2"), *second], compress=compress)
    conn.close()
    return path


def _entries_of(path: Path, session_id: str) -> list[dict]:
    conn = openclaw_db.connect(path)
    columns = {r[1] for r in conn.execute("pragma table_info(transcript_events)")}
    blob = "event_zstd" if "event_zstd" in columns else "null"
    rows = conn.execute(
        f"select event_json, {blob} from transcript_events where session_id = ? order by seq",
        [session_id],
    ).fetchall()
    conn.close()
    out = []
    for text, blob in rows:
        if text is None:
            import zstandard

            text = zstandard.ZstdDecompressor().decompress(blob).decode()
        event = json.loads(text)
        if event["type"] != "session":
            out.append(event)
    return out


class TestReadingTheStore:
    @pytest.mark.parametrize("version", openclaw_db.VERSIONS)
    def test_every_session_imports_with_pi_context(self, tmp_path: Path, version: int) -> None:
        path = _build(tmp_path, version, compress=version >= 23)
        with Store(tmp_path / "s.db", counter="chars4") as store:
            report = sync_paths(store, [path])
            assert report.errors == [] and report.skipped == 0
            assert len(report.sessions) == 2
            for sid in ("s1", "s2"):
                entries = _entries_of(path, sid)
                session = store.resolve_session(sid)
                assert session.source_path == str(path.resolve()) + f"#{sid}"
                for entry in entries:
                    want = reference_context(entries, entry["id"])
                    got = store.context(session.id, entry["id"])
                    assert got.messages == want["messages"]
                    assert got.model == want["model"]
                assert (
                    store.context(session.id).messages
                    == reference_context(entries, entries[-1]["id"])["messages"]
                )

    def test_zstd_rows_decode_to_the_same_entries(self, tmp_path: Path) -> None:
        plain = _build(tmp_path / "a", 23)
        packed = _build(tmp_path / "b", 23, compress=True)
        conn = sqlite3.connect(packed)
        assert (
            conn.execute(
                "select count(*) from transcript_events where event_zstd is not null"
            ).fetchone()[0]
            > 10
        )
        conn.close()
        exported = []
        for path in (plain, packed):
            with Store(memory=True, counter="chars4") as store:
                sync_paths(store, [path])
                exported.append(list(store.iter_export_entries(store.resolve_session("s1").id)))
        assert exported[0] == exported[1] and len(exported[0]) == 15

    def test_a_damaged_zstd_row_is_reported_and_the_rest_kept(self, tmp_path: Path) -> None:
        path = _build(tmp_path, 23, compress=True)
        total = len(_entries_of(path, "s1")) + len(_entries_of(path, "s2"))
        conn = openclaw_db.connect(path)
        conn.execute(
            "update transcript_events set event_zstd = x'28b52ffd00' where session_id = 's2' and seq = 2"
        )
        conn.close()
        with Store(memory=True, counter="chars4") as store:
            report = sync_paths(store, [path])
            bad = [p for p in report.problems if p["kind"] == "bad_zstd"]
            assert len(bad) == 1 and bad[0]["line"] == 2 and "s2" in bad[0]["path"]
            assert report.turns == total - 1

    @pytest.mark.parametrize("version", openclaw_db.VERSIONS)
    def test_lineage_becomes_parent_sessions(self, tmp_path: Path, version: int) -> None:
        path = _build(tmp_path, version)
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [path])
            first, second = store.resolve_session("s1"), store.resolve_session("s2")
            row = store.conn.execute(
                "select p.uid, l.reason, l.previous_source_id, l.session_key from sessions s "
                "join sessions p on p.id = s.parent_session_id "
                "join session_lineage l on l.session_id = s.id where s.uid = ?",
                [second.id],
            ).fetchone()
            assert tuple(row) == (first.id, "reset", "s1", "agent:main:main")

    def test_import_reads_the_store_too(self, tmp_path: Path, runner) -> None:
        path = _build(tmp_path, 23, compress=True)
        db = tmp_path / "i.db"
        result = runner.invoke(cli, ["--db", str(db), "import", str(path), "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert sorted(report["sessions"]) == ["s1", "s2"]
        with Store(db) as store:
            assert store.conn.execute("select count(*) from session_lineage").fetchone()[0] == 2

    def test_unknown_schema_version_is_refused_naming_it(self, tmp_path: Path, runner) -> None:
        path = _build(tmp_path, 23)
        conn = sqlite3.connect(path)
        conn.execute("pragma user_version = 24")
        conn.close()
        with pytest.raises(UnknownSchemaVersion, match="schema version 24"):
            OpenClawStore(path).__enter__()
        result = runner.invoke(cli, ["--db", str(tmp_path / "x.db"), "sync", str(path)])
        assert result.exit_code == 1
        assert "schema version 24" in result.output
        with Store(tmp_path / "x.db") as store:
            assert store.list_sessions() == []

    def test_the_store_is_opened_read_only(self, tmp_path: Path) -> None:
        path = _build(tmp_path, 19)
        with OpenClawStore(path) as source, pytest.raises(sqlite3.OperationalError):
            source.conn.execute("delete from transcript_events")


class TestSyncingTheStore:
    def test_second_sync_adds_nothing_and_opens_nothing(self, tmp_path: Path, monkeypatch) -> None:
        path = _build(tmp_path, 23, compress=True)
        with Store(tmp_path / "s.db", counter="chars4") as store:
            first = sync_paths(store, [path])
            assert first.turns > 0
            opened = []
            monkeypatch.setattr(OpenClawStore, "__enter__", lambda self: opened.append(self))
            again = sync_paths(store, [path])
            assert (again.turns, again.unchanged, opened) == (0, 1, [])

    def test_new_rows_are_read_from_the_checkpoint_seq(self, tmp_path: Path) -> None:
        path = _build(tmp_path, 19)
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [path])
            more = openclaw_db.conversation("s2-more-", 2)
            more[0]["parentId"] = _entries_of(path, "s2")[-1]["id"]
            conn = openclaw_db.connect(path)
            last = conn.execute(
                "select max(seq) from transcript_events where session_id='s2'"
            ).fetchone()[0]
            openclaw_db.add_events(conn, "s2", more, start_seq=last + 1)
            conn.close()
            report = sync_paths(store, [path])
            assert (report.entries, report.turns, report.grown, report.reread) == (
                len(more),
                len(more),
                1,
                [],
            )
            entries = _entries_of(path, "s2")
            assert (
                store.context("s2").messages
                == reference_context(entries, entries[-1]["id"])["messages"]
            )

    def test_a_rewritten_session_is_reread_and_reported(self, tmp_path: Path) -> None:
        path = _build(tmp_path, 19)
        with Store(tmp_path / "s.db", counter="chars4") as store:
            sync_paths(store, [path])
            conn = openclaw_db.connect(path)
            conn.execute("insert into transcript_rewrite_watermarks values ('s1', 'g2', 0)")
            conn.close()
            report = sync_paths(store, [path])
            assert len(report.reread) == 1 and "s1: rewritten (generation g2)" in report.reread[0]
            assert (
                report.turns == 0 and report.conflicts == 0
            )  # same rows: nothing new, nothing mixed


WRITER = textwrap.dedent(
    """
    import json, sqlite3, sys, time
    sys.path.insert(0, sys.argv[3])
    from tests import openclaw_db
    path, count = sys.argv[1], int(sys.argv[2])
    conn = openclaw_db.connect(path)
    conn.execute("pragma busy_timeout = 0")  # a blocked write fails at once
    worst = 0.0
    parent = "s2-a2"
    seq = conn.execute("select max(seq) from transcript_events where session_id='s2'").fetchone()[0]
    for n in range(count):
        entry = {"type": "message", "id": f"w{n}", "parentId": parent,
                 "timestamp": "2026-09-01T11:00:00.000Z",
                 "message": {"role": "user", "content": f"more {n}", "timestamp": 0}}
        started = time.monotonic()
        openclaw_db.add_events(conn, "s2", [entry], start_seq=seq + 1 + n)
        worst = max(worst, time.monotonic() - started)
        parent = entry["id"]
    print(json.dumps({"worst": worst}))
    """
)


@pytest.mark.slow
def test_a_concurrent_openclaw_writer_is_never_blocked_and_nothing_is_lost(tmp_path: Path) -> None:
    path = _build(tmp_path, 23)
    root = str(Path(__file__).resolve().parents[1])
    count = 400
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(count), root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with Store(tmp_path / "s.db", counter="chars4") as store:
        while writer.poll() is None:
            report = sync_paths(store, [path])
            assert report.errors == [] and report.conflicts == 0
            time.sleep(0.01)
        _out, err = writer.communicate()
        assert writer.returncode == 0, err  # busy_timeout 0: any lock we took fails the writer
        sync_paths(store, [path])
        turns = store.conn.execute(
            "select count(*), count(distinct t.uid) from turns t join sessions s on s.id = t.session_id "
            "where s.uid = 's2' and t.uid like 'w%'"
        ).fetchone()
        assert tuple(turns) == (count, count)
        entries = _entries_of(path, "s2")
        assert (
            store.context("s2").messages == reference_context(entries, f"w{count - 1}")["messages"]
        )


def test_a_session_migrated_from_jsonl_is_stored_once(tmp_path: Path) -> None:
    path = _build(tmp_path, 23, compress=True)
    jsonl = tmp_path / "s1.jsonl"
    entries = _entries_of(path, "s1")
    jsonl.write_text(
        "".join(json.dumps(e) + "\n" for e in [openclaw_db.header("s1"), *entries[:5]])
    )
    with Store(tmp_path / "s.db", counter="chars4") as store:
        store.import_jsonl(jsonl)  # before OpenClaw moved its transcripts into SQLite
        report = sync_paths(store, [path])
        assert (report.conflicts, report.skipped) == (0, 0)
        assert report.turns == len(entries) - 5 + len(_entries_of(path, "s2"))
        assert [s.id for s in store.list_sessions()].count("s1") == 1
