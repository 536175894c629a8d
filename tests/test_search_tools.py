"""Search in bounded time on huge messages, and the index as sqlite-utils and Datasette see it.

Issue 15, item 1: FTS5's ``snippet()`` costs the square of the hits in one text (a 1 MB
tool output repeating a word took over 300 s); snippets of long texts now come from a
bounded window. Item 11: the message index is declared ``content="messages"`` so that
the real sqlite-utils CLI and a real Datasette server (started here on 127.0.0.1) find it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nexus_store import Store
from nexus_store.datasette import canned_queries, metadata
from nexus_store.store import snippets
from nexus_store.store.indexqueue import check_message_index
from nexus_store.store.snippets import WindowSnippets, first_hit, query_terms

try:
    from tests.old_schema import copy_to_old_schema
    from tests.test_cookbook import CHECKS, PARAMS, build_fixture
except ImportError:  # tests/ itself on sys.path
    from old_schema import copy_to_old_schema  # type: ignore[no-redef]
    from test_cookbook import CHECKS, PARAMS, build_fixture  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Generous: the bounded snippet answers in about a second here; FTS5's snippet() over
# the whole text took over 300 s, so only the old behaviour can miss this.
TIMEOUT = 60


def write_big_transcript(path: Path) -> None:
    """The issue's reproduction: one tool result of 1 MB repeating one word."""
    lines = [
        {"type": "session", "version": 3, "id": "b", "timestamp": "2026-01-01T00:00:00Z"},
        {
            "type": "message",
            "id": "m",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {
                "role": "toolResult",
                "toolCallId": "c",
                "toolName": "bash",
                "content": [{"type": "text", "text": "word " * 200_000}],
            },
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "nexus-store"), "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture
def big_db(tmp_path: Path) -> Path:
    db = tmp_path / "sessions.db"
    build_fixture(db)
    transcript = tmp_path / "b.jsonl"
    write_big_transcript(transcript)
    with Store(db, counter="chars4") as store:
        store.import_jsonl(transcript)
    return db


class TestBoundedSnippets:
    def test_cli_search_on_a_1mb_message_answers(self, big_db: Path) -> None:
        result = cli(big_db, "search", "word", "--json")
        assert result.returncode == 0, result.stderr
        (hit,) = json.loads(result.stdout)
        assert hit["turn_id"] == "m" and hit["tool_name"] == "bash"
        assert hit["snippet"].startswith("[word] [word]") and hit["snippet"].endswith("…")
        assert len(hit["snippet"]) < 200

    def test_api_search_on_a_1mb_message_uses_the_window(
        self, big_db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        windows: list[int] = []
        real = WindowSnippets.snippet

        def spy(self: WindowSnippets, text: str, *args: Any, **kwargs: Any) -> str:
            windows.append(len(text))
            return real(self, text, *args, **kwargs)

        monkeypatch.setattr(WindowSnippets, "snippet", spy)
        with Store(big_db) as store:
            (hit,) = store.search("word")
            assert windows == [1_000_000]  # the long text went to the window, once
            assert store.search("walrus")  # short texts keep FTS5's snippet
            assert windows == [1_000_000]
        assert hit.snippet.count("[word]") == 16

    def test_hit_in_the_middle_of_a_long_text(self, store: Store) -> None:
        s = store.create_session()
        text = "filler " * 100_000 + "the Café walrus is here " + "more " * 5_000
        store.append_message(s.id, {"role": "user", "content": text})
        (hit,) = store.search("walrus")
        assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
        assert "the Café [walrus] is here" in hit.snippet
        # diacritics fold as the tokenizer folds them
        assert "[Café]" in store.search("cafe")[0].snippet
        assert "[walrus is]" in store.search('"walrus is"')[0].snippet
        assert "[walrus]" in store.search("walr*")[0].snippet
        assert "[here]" in store.search("here NOT zebra")[0].snippet

    def test_long_summaries_are_bounded_too(self, store: Store) -> None:
        s = store.create_session()
        first = store.append_message(s.id, {"role": "user", "content": "hi"})
        store.append_compaction(s.id, "note " * 50_000 + "walrus", first.id, 10)
        (hit,) = store.search("walrus", role="compactionSummary")
        assert hit.snippet.endswith("[walrus]") and hit.snippet.startswith("…")

    def test_window_is_bounded(self) -> None:
        text = "a " * 1_000_000 + "zebra"
        start, end = snippets._window(text, first_hit(text, query_terms("zebra")))
        assert end - start <= snippets.WINDOW_CHARS
        assert text[start:end].endswith("zebra")

    def test_query_terms(self) -> None:
        assert query_terms('"Permission denied" OR migrat* NOT sqlite') == [
            ("permission", False),
            ("denied", False),
            ("migrat", True),
        ]
        assert query_terms("NEAR(alpha beta)") == [("alpha", False), ("beta", False)]

    def test_no_recognised_hit_gives_the_start(self) -> None:
        windows = WindowSnippets()
        try:
            out = windows.snippet("x " * 5_000, "zebra", ("[", "]"), 4)
        finally:
            windows.close()
        assert out == "x x x x…"


class TestSqliteUtils:
    """Since schema 0065 the index reads its text from the view messages_text (large
    content is compressed), so sqlite-utils no longer finds it from `messages`; its CLI
    and Python API reach it with SQL, and nexus_store's sqlite-utils plugin puts the
    functions that decompress on their connections."""

    def test_sqlite_utils_cli_queries_the_index_and_reads_compressed_text(
        self, big_db: Path
    ) -> None:
        exe = shutil.which("sqlite-utils", path=str(BIN)) or shutil.which("sqlite-utils")
        assert exe, "sqlite-utils is a core dependency; its CLI must be installed"
        found = (
            "select id, role from messages where id in "
            "(select rowid from messages_fts where messages_fts match :q) order by id"
        )
        out = subprocess.run(
            [exe, "query", str(big_db), found, "-p", "q", "walrus"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        ).stdout
        assert [r["id"] for r in json.loads(out)] == [1, 5, 6, 9, 15]
        # the 1 MB tool output is stored compressed; the plugin's function reads it
        text = subprocess.run(
            [
                exe,
                "query",
                str(big_db),
                "select text from messages_text where role = 'toolResult' "
                "and length(text) > 100000",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        ).stdout
        assert json.loads(text) == [{"text": "word " * 200_000}]

    def test_python_api_reads_through_the_plugin(self, big_db: Path) -> None:
        import sqlite_utils

        db = sqlite_utils.Database(big_db)  # runs the plugins' prepare_connection
        row = db.execute(
            "select m.role, m.content_zstd is not null, length(v.text) from messages m "
            "join messages_text v on v.id = m.id where m.id in "
            "(select rowid from messages_fts where messages_fts match 'word')"
        ).fetchone()
        assert row == ("toolResult", 1, 1_000_000)

    def test_migration_0065_reindexes_an_older_store(
        self, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        today = tmp_path / "today.db"
        with Store(today, counter="chars4") as store:
            s = store.create_session()
            store.append_message(s.id, {"role": "user", "content": "an old walrus " * 200})
        copy_to_old_schema(today, store_path, "0050_reference_indexes", monkeypatch)
        with Store(store_path) as store:
            sql = store.conn.execute(
                "select sql from sqlite_master where name = 'messages_fts'"
            ).fetchone()[0]
            assert 'content="messages_text"' in sql
            triggers = {
                row[0]
                for row in store.conn.execute(
                    "select name from sqlite_master where type = 'trigger' and tbl_name = 'messages'"
                )
            }
            assert triggers == {
                "messages_fts_after_insert",
                "messages_fts_before_delete",
                "messages_fts_before_update",
                "messages_fts_after_update",
            }
            (hit,) = store.search("walrus")
            assert hit.snippet.startswith("an old [walrus]")
            assert check_message_index(store.handle) is None
            s2 = store.create_session()
            store.append_message(s2.id, {"role": "user", "content": "a new walrus"})
            assert len(store.search("walrus")) == 2
            store.conn.execute(
                "insert into messages_fts (messages_fts, rank) values ('integrity-check', 1)"
            )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fixture_db(tmp_path: Path) -> Path:
    db = tmp_path / "cookbook.db"
    build_fixture(db)
    return db


@pytest.fixture
def datasette_server(fixture_db: Path, big_db: Path, tmp_path: Path) -> Iterator[str]:
    """A real ``datasette serve`` on 127.0.0.1 over the cookbook database and the 1 MB one."""
    exe = shutil.which("datasette", path=str(BIN)) or shutil.which("datasette")
    if exe is None:
        pytest.skip("datasette is not installed (pip install -e '.[test]' installs it)")
    meta = metadata(fixture_db.stem)
    meta["databases"].update(metadata(big_db.stem)["databases"])
    meta_file = tmp_path / "metadata.json"
    meta_file.write_text(json.dumps(meta))
    port = _free_port()
    args = [exe, "serve", str(fixture_db), str(big_db), "-m", str(meta_file)]
    proc = subprocess.Popen(
        [*args, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                if httpx.get(f"{url}/-/versions.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"datasette did not start: {err}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class TestRealDatasetteServer:
    def test_search_and_every_canned_query(
        self, datasette_server: str, fixture_db: Path, big_db: Path
    ) -> None:
        base = f"{datasette_server}/{fixture_db.stem}"
        with httpx.Client(timeout=TIMEOUT) as client:
            hits = client.get(
                f"{base}/messages.json", params={"_search": "walrus", "_shape": "array"}
            )
            assert hits.status_code == 200, hits.text
            assert sorted(r["id"] for r in hits.json()) == [1, 5, 6, 9, 15]
            for name in canned_queries():
                response = client.get(f"{base}/{name}.json", params={**PARAMS, "_shape": "array"})
                assert response.status_code == 200, (name, response.text)
                CHECKS[name](response.json())
            # the canned search over the 1 MB message answers within Datasette's time limit
            big = client.get(
                f"{datasette_server}/{big_db.stem}/search_messages.json",
                params={"query": "word", "_shape": "array"},
            )
            assert big.status_code == 200, big.text
            (row,) = big.json()
            assert row["turn"] == "m" and row["snippet"].startswith("[word] word")
            assert len(row["snippet"]) < 200
