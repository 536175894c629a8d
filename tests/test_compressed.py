"""Large message content stored zstd-compressed (schema 0065, issue 17).

The reference model is the same store with compression switched off (a threshold no
text reaches): every read — context, export, search hits and snippets — must be equal,
and the search index must match its content exactly (FTS5's integrity-check with the
content comparison) through appends, gc and copy.
"""

from __future__ import annotations

import io
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.errors import ContentCorrupt
from nexus_store.store import compressed, indexqueue

try:
    from tests.old_schema import copy_to_old_schema
except ImportError:  # tests/ itself on sys.path
    from old_schema import copy_to_old_schema  # type: ignore[no-redef]

FAR = datetime(2200, 1, 1, tzinfo=UTC)


def fts_ok(store: Store) -> None:
    """FTS5's check that the index matches the text the view gives, row for row."""
    indexqueue.ensure_indexed(store.handle)  # the tail above the watermark (schema 0060)
    store.conn.execute(
        "insert into messages_fts (messages_fts, rank) values ('integrity-check', 1)"
    )


def stored(store: Store) -> list[tuple[Any, ...]]:
    return store.conn.execute(
        "select content_kind, text is not null, content_json is not null, "
        "content_zstd is not null from messages order by id"
    ).fetchall()


def hits(store: Store, query: str) -> list[tuple[str, str | None, str]]:
    return [(h.turn_id, h.role, h.snippet) for h in store.search(query)]


def tool_call(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": text},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": text[:50]}},
        ],
    }


class TestLayout:
    def test_threshold_edge_in_utf8_bytes(self, store: Store) -> None:
        s = store.create_session()
        edge = compressed.THRESHOLD
        below = "é" * (edge // 2 - 1) + "a"  # one byte short, in edge // 2 characters
        at = "é" * (edge // 2)  # exactly the threshold in bytes
        store.append_message(s.id, {"role": "user", "content": below})
        store.append_message(s.id, {"role": "user", "content": at})
        store.append_message(s.id, {"role": "user", "content": "x" * edge})
        assert stored(store) == [
            ("string", 1, 0, 0),
            ("string", 0, 0, 1),
            ("string", 0, 0, 1),
        ]
        assert [m["content"] for m in store.context(s.id).messages] == [below, at, "x" * edge]
        assert compressed.is_large(at) and not compressed.is_large(below)

    def test_json_text_is_derived_not_stored(self, store: Store) -> None:
        s = store.create_session()
        store.append_message(s.id, tool_call("short walrus"))
        store.append_message(s.id, tool_call("long walrus " * 200))
        assert stored(store) == [("json", 0, 1, 0), ("json", 0, 0, 1)]
        view = store.conn.execute("select text from messages_text order by id").fetchall()
        assert view == [("short walrus",), ("long walrus " * 200,)]
        assert sorted(h[2][:15] for h in hits(store, "walrus")) == [
            "long [walrus] l",
            "short [walrus]",
        ]
        fts_ok(store)

    def test_filter_columns_stay_plain(self, store: Store) -> None:
        s = store.create_session()
        store.append_message(
            s.id,
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "isError": True,
                "content": [{"type": "text", "text": "y" * 5000}],
            },
        )
        row = store.conn.execute(
            "select role, tool_name, tool_call_id, is_error, tokens > 0 from messages"
        ).fetchone()
        assert row == ("toolResult", "bash", "c1", 1, 1)


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
_SIZED = st.tuples(_TEXT, st.sampled_from([1, 3, 30, 200])).map(lambda p: p[0] * p[1])


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    text = draw(_SIZED) + draw(st.sampled_from(["", " walrus ", "walrus"]))
    shape = draw(st.sampled_from(["string", "block", "json", "bash"]))
    if shape == "string":
        return {"role": "user", "content": text}
    if shape == "block":
        return {"role": "toolResult", "toolCallId": "c", "toolName": "bash",
                "content": [{"type": "text", "text": text}]}  # fmt: skip
    if shape == "bash":
        return {"role": "bashExecution", "command": "ls", "output": text, "exitCode": 0}
    return tool_call(text)


def _fill(store: Store, batch: list[dict[str, Any]]) -> str:
    s = store.create_session(id="s")
    for i, message in enumerate(batch):
        entry = {"type": "message", "id": f"m{i}", "timestamp": "2026-01-01T00:00:00Z"}
        store.append_entry(s.id, {**entry, "message": message})
    return s.id


def export(store: Store, sid: str) -> str:
    """The session's entries as JSONL, without the header (its creation time differs)."""
    out = io.StringIO()
    store.export_jsonl(sid, out)
    return out.getvalue().split("\n", 1)[1]


class TestRoundTrip:
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(batch=st.lists(messages(), min_size=1, max_size=6))
    def test_equal_to_the_uncompressed_store(
        self, batch: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        with Store(memory=True, counter="chars4") as packed:
            sid = _fill(packed, batch)
            with monkeypatch.context() as patch:
                patch.setattr(compressed, "THRESHOLD", 10**12)
                with Store(memory=True, counter="chars4") as plain:
                    _fill(plain, batch)
                    assert not any(row[3] for row in stored(plain))
                    want = (plain.context(sid).messages, export(plain, sid), hits(plain, "walrus"))
            got = (packed.context(sid).messages, export(packed, sid), hits(packed, "walrus"))
            assert got == want
            fts_ok(packed)
            # export then import into a fresh store: the same entries, compressed again
            path = tmp_path / "e.jsonl"
            whole = io.StringIO()
            packed.export_jsonl(sid, whole)
            path.write_text(whole.getvalue())
            with Store(memory=True, counter="chars4") as again:
                (new,) = again.import_jsonl(path)
                assert export(again, new) == got[1]
                assert stored(again) == stored(packed)
                fts_ok(again)
            # copy to another store: equal, index exact
            with Store(memory=True, counter="chars4") as other:
                packed.copy_to(other)
                assert other.context(sid).messages == got[0]
                assert hits(other, "walrus") == got[2]
                fts_ok(other)


class TestGc:
    def test_gc_removes_compressed_and_derived_rows_from_the_index(self, store: Store) -> None:
        s = store.create_session()
        root = store.append_message(s.id, {"role": "user", "content": "start"})
        store.append_message(s.id, {"role": "user", "content": "zebra " * 500})
        store.append_message(s.id, tool_call("zebra call " * 300))
        store.append_message(s.id, tool_call("small zebra"))
        store.navigate(s.id, root.id)
        store.append_message(s.id, {"role": "user", "content": "the live branch"})
        assert len(store.search("zebra")) == 3
        report = store.gc(s.id, dead_branches_older_than=1, now=FAR)
        assert report.dead_branch_turns == 3
        assert store.search("zebra") == []
        count = "select count(*) from messages_fts where messages_fts match 'zebra'"
        assert store.conn.execute(count).fetchone()[0] == 0
        fts_ok(store)


class TestDamagedBlob:
    @pytest.fixture
    def damaged(self, store_path: Path) -> tuple[Path, str, int]:
        with Store(store_path, counter="chars4") as store:
            s = store.create_session(id="hurt")
            store.append_message(s.id, {"role": "user", "content": "fine"})
            store.append_message(s.id, {"role": "user", "content": "walrus " * 400})
            key = store.conn.execute(
                "select id from messages where content_zstd is not null"
            ).fetchone()[0]
        # damage the blob alone, as a bad disk would: the index keeps its entry
        conn = sqlite3.connect(store_path, isolation_level=None)
        triggers = conn.execute(
            "select name, sql from sqlite_master where type = 'trigger' and name like '%update'"
        ).fetchall()
        conn.execute("begin")
        for name, _sql in triggers:
            conn.execute(f"drop trigger {name}")
        conn.execute("update messages set content_zstd = x'28b52ffd00ff' where id = ?", [key])
        for _name, sql in triggers:
            conn.execute(sql)
        conn.execute("commit")
        conn.close()
        return store_path, "hurt", key

    def test_reads_name_the_message(self, damaged: tuple[Path, str, int]) -> None:
        path, sid, key = damaged
        with Store(path) as store:
            with pytest.raises(ContentCorrupt, match=f"message row {key}"):
                store.context(sid)
            with pytest.raises(ContentCorrupt, match=f"message row {key}"):
                export(store, sid)
            with pytest.raises(ContentCorrupt, match=f"message row {key}"):
                store.search("walrus")
            # what is intact still reads
            assert [h.snippet for h in store.search("fine")] == ["[fine]"]

    def test_cli_says_one_line(self, damaged: tuple[Path, str, int], runner: CliRunner) -> None:
        path, sid, key = damaged
        result = runner.invoke(cli, ["--db", str(path), "context", "show", sid, "--json"])
        assert result.exit_code == 1
        assert f"message row {key}" in result.output and "Traceback" not in result.output

    def test_doctor_lists_it(self, damaged: tuple[Path, str, int]) -> None:
        path, _sid, key = damaged
        with Store(path) as store:
            problems = [f.message for f in store.doctor().findings if f.check == "content"]
        assert any(f"message row {key}" in m for m in problems), problems


class TestMigration:
    def test_0065_converts_an_older_store_in_place(
        self, store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        today = tmp_path / "today.db"
        batch = [
            {"role": "user", "content": "small walrus"},
            {"role": "user", "content": "big walrus " * 300},
            tool_call("derived walrus"),
            tool_call("derived big walrus " * 200),
            {"role": "bashExecution", "command": "ls", "output": "out " * 600, "exitCode": 0},
            {"role": "user", "content": "lone \ud800 surrogate " * 100},
        ]
        with Store(today, counter="chars4") as store:
            sid = _fill(store, batch)
            want = (store.context(sid).messages, export(store, sid), hits(store, "walrus"))
            layout = stored(store)
        copy_to_old_schema(today, store_path, "0050_reference_indexes", monkeypatch)
        conn = sqlite3.connect(store_path)
        old = conn.execute("select count(*) from messages where text is null").fetchone()[0]
        conn.close()
        assert old == 0  # before 0065 every message with content had its text
        with Store(store_path) as store:
            assert stored(store) == layout
            got = (store.context(sid).messages, export(store, sid), hits(store, "walrus"))
            assert got == want
            fts_ok(store)
            assert [f for f in store.doctor().findings if f.check == "content"] == []


def test_public_decompress_is_one_line(store: Store) -> None:
    s = store.create_session()
    store.append_message(s.id, {"role": "user", "content": "ünïcode " * 300})
    (blob,) = store.conn.execute("select content_zstd from messages").fetchone()
    import zstandard

    assert zstandard.ZstdDecompressor().decompress(blob).decode() == "ünïcode " * 300
    assert json.loads(json.dumps(compressed.decompress(blob))) == "ünïcode " * 300
