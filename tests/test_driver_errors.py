"""Driver errors reach callers as nexus_store errors (issue 18, item 3).

A full disk (a 5 MB tmpfs where the test can mount one, else RLIMIT_FSIZE), a file
with overwritten pages, and a 1 MB id copied to PostgreSQL: each gives a
`StorageError` subclass naming the database and what to do, the CLI prints one
line, and nothing committed before is lost.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import resource
import signal
import sqlite3
import string
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.errors import (
    DatabaseCorrupt,
    DiskFull,
    DriverLimitExceeded,
    NexusError,
    StorageError,
)
from nexus_store.store.driver_errors import translate

pytest_plugins = ["tests.pg_server"]

DISK_BYTES = 5 * 1024 * 1024
FULL_IS_IO: list[bool] = []  # set while the disk is simulated by RLIMIT_FSIZE


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on which writes beyond ~5 MB fail with 'disk full'.

    A 5 MB tmpfs when this process may mount one (root); otherwise RLIMIT_FSIZE
    limits every file this process writes to 5 MB (SIGXFSZ ignored, so the write
    fails with EFBIG instead of killing the process; SQLite reports that as an I/O
    error, not SQLITE_FULL, so tests accept any `StorageError` there: `FULL_IS_IO`).
    """
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
                capture_output=True,
                check=False,
            ).returncode
            == 0
        )
    except OSError:  # no mount(8)
        mounted = False
    if mounted:
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        return
    FULL_IS_IO.append(True)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (DISK_BYTES, hard))
    try:
        yield mount
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
        FULL_IS_IO.clear()


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("pragma integrity_check").fetchone()[0])
    finally:
        conn.close()


def _ids(db: Path, sid: str) -> list[str]:
    with Store(db) as store:
        return [t.id for t in store.iter_turns(sid)]


def _noise(n: int) -> str:
    """~100 KB that does not compress (stored payloads are compressed)."""
    return base64.b64encode(random.Random(n).randbytes(75_000)).decode()


@pytest.fixture
def big_source(tmp_path: Path) -> Path:
    """An 8 MB pi transcript (written before any RLIMIT_FSIZE applies)."""
    source = tmp_path / "big.jsonl"
    lines: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": "big", "timestamp": "2026-01-01T00:00:00Z"}
    ]
    parent = None
    for n in range(80):
        lines.append(
            {
                "type": "message",
                "id": f"e{n}",
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": _noise(n), "timestamp": n},
            }
        )
        parent = f"e{n}"
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return source


class TestFullDisk:
    def test_append_on_a_full_disk_is_disk_full_and_keeps_every_commit(
        self, small_disk: Path
    ) -> None:
        db = small_disk / "s.db"
        committed: list[str] = []
        with Store(db, counter="chars4") as store:
            sid = store.create_session().id
            with pytest.raises(DiskFull if not FULL_IS_IO else StorageError) as caught:
                for n in range(1000):
                    turn = store.append_message(
                        sid, {"role": "user", "content": _noise(n), "timestamp": n}
                    )
                    committed.append(turn.id)
            assert str(db) in str(caught.value) and "try again" in str(caught.value)
            assert "\n" not in str(caught.value)
            assert isinstance(caught.value, StorageError) and caught.value.where == str(db)
            assert len(committed) > 3  # the disk filled after some appends, not at once
            # the store still reads, and a later small write that fits is not blocked
            assert [t.id for t in store.iter_turns(sid)] == committed
        assert _integrity(db) == "ok"
        assert _ids(db, sid) == committed

    def test_cli_import_on_a_full_disk_prints_one_line(
        self, big_source: Path, small_disk: Path, runner: CliRunner
    ) -> None:
        db = small_disk / "s.db"
        with Store(db, counter="chars4") as store:
            kept = store.create_session(id="kept").id
            store.append_message(kept, {"role": "user", "content": "keep me", "timestamp": 0})
        source = big_source
        result = runner.invoke(cli, ["--db", str(db), "import", str(source)])
        assert result.exit_code == 1, result.output
        assert ("disk is full" if not FULL_IS_IO else "disk") in result.output
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert _integrity(db) == "ok"
        with Store(db) as store:
            assert [t.id for t in store.iter_turns(kept)] != []
            assert store.context(kept).messages[0]["content"] == "keep me"
            # the import is atomic per file: none of it, not half of it
            assert "big" not in [s.id for s in store.list_sessions()]


def _corrupt(db: Path) -> None:
    """Overwrite the second half of the file's pages (the schema at the start stays)."""
    conn = sqlite3.connect(db)
    conn.execute("pragma wal_checkpoint(truncate)")
    page = conn.execute("pragma page_size").fetchone()[0]
    pages = conn.execute("pragma page_count").fetchone()[0]
    conn.close()
    with db.open("r+b") as handle:
        for number in range(pages // 2, pages):
            handle.seek(number * page)
            handle.write(bytes([0xA5]) * page)


@pytest.fixture
def corrupted(tmp_path: Path) -> Path:
    db = tmp_path / "bad.db"
    with Store(db, counter="chars4") as store:
        for s in range(5):
            sid = store.create_session(id=f"s{s}").id
            for n in range(40):
                # random letters: large content is stored compressed (schema 0065), and
                # the file must stay many pages past its schema for _corrupt to hit rows
                noise = "".join(random.Random(s * 100 + n).choices(string.ascii_letters, k=2000))
                store.append_message(
                    sid, {"role": "user", "content": f"needle {n} " + noise, "timestamp": n}
                )
    _corrupt(db)
    return db


class TestCorruptFile:
    @pytest.mark.parametrize(
        "args",
        [
            ["search", "needle"],
            ["gc", "--all", "--dead-branches-older-than", "0", "--yes"],
            ["context", "show", "s3"],
            ["export", "s4"],  # (rows in the damaged half: compressed rows move the layout)
        ],
    )
    def test_cli_names_the_damage_in_one_line(
        self, corrupted: Path, runner: CliRunner, args: list[str]
    ) -> None:
        result = runner.invoke(cli, ["--db", str(corrupted), *args])
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        line = result.stderr.strip()  # (export wrote the header line to stdout first)
        assert len(line.splitlines()) == 1
        assert "damaged" in line and "doctor" in line and str(corrupted) in line

    def test_library_raises_database_corrupt(self, corrupted: Path) -> None:
        with Store(corrupted) as store, pytest.raises(DatabaseCorrupt) as caught:
            store.search("needle")
        assert "malformed" in str(caught.value)

    def test_doctor_still_reports_instead_of_failing(
        self, corrupted: Path, runner: CliRunner
    ) -> None:
        result = runner.invoke(cli, ["--db", str(corrupted), "doctor", "--json"])
        assert result.exit_code == 1
        report = json.loads(result.output)
        assert any(f["check"] == "integrity" for f in report["findings"])


class TestTranslate:
    def test_every_kind_of_sqlite_error_becomes_a_nexus_error(self) -> None:
        conn = sqlite3.connect(":memory:")
        with pytest.raises(sqlite3.Error) as caught:
            conn.execute("select * from nowhere")
        err = translate(caught.value, "reading x.db")
        assert isinstance(err, StorageError) and err.where == "reading x.db"
        assert "no such table" in str(err) and "doctor" in str(err)

    def test_a_nexus_error_passes_unchanged(self) -> None:
        original = NexusError("mine")
        assert translate(original, "anywhere") is original


class TestDriverLimit:
    def test_copy_of_a_1mb_id_to_postgresql_is_a_clear_error(
        self, tmp_path: Path, pg_url: str, runner: CliRunner
    ) -> None:
        source = tmp_path / "src.db"
        with Store(source, counter="chars4") as store:
            first = store.create_session(id="a-first").id
            store.append_message(first, {"role": "user", "content": "fine", "timestamp": 0})
            second = store.create_session(id="b-huge").id
            store.append_entry(
                second,
                {
                    "type": "message",
                    "id": "i" * 1_000_000,
                    "message": {"role": "user", "content": "huge id", "timestamp": 0},
                },
            )
        with Store(source) as src, Store(pg_url, counter="chars4") as dest:
            with pytest.raises(DriverLimitExceeded) as caught:
                src.copy_to(dest)
            assert "larger than the database accepts" in str(caught.value)
            assert "\n" not in str(caught.value)
            # the session copied before the failure is whole; the failing one is absent
            assert [m["content"] for m in dest.context(first).messages] == ["fine"]
            assert [s.id for s in dest.list_sessions()] == [first]
        result = runner.invoke(cli, ["copy", "--from", str(source), "--to", pg_url, "-q"])
        assert result.exit_code == 1
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
        assert "larger than the database accepts" in result.output


with contextlib.suppress(ImportError):
    import psycopg  # noqa: F401  (the PostgreSQL tests skip without a server, not psycopg)
