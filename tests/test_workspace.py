"""Workspace bootstrap files: exact truncation, loading, recording with a session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nexus_store import InvalidEntry, SessionNotFound, Store
from nexus_store.workspace import (
    DEFAULT_MAX_CHARS,
    TRUNCATION_MARKER,
    WorkspaceFile,
    load_workspace,
    make_workspace_file,
    sha256_text,
    system_prompt_addition,
    trim_content,
)
from tests.test_conformance import BACKENDS, open_backend

pytest_plugins = ["tests.pg_server"]


class TestTruncation:
    def test_marker_is_openclaws(self) -> None:
        assert TRUNCATION_MARKER == "\n\n[... content truncated ...]\n\n"
        assert DEFAULT_MAX_CHARS == 20_000

    @pytest.mark.parametrize("length", [0, 1, 19_999, 20_000])
    def test_at_or_under_the_limit_is_untouched(self, length: int) -> None:
        text = "x" * length
        assert trim_content(text) == (text, False)

    def test_one_over_the_limit_keeps_14000_head_and_4000_tail(self) -> None:
        text = "".join(chr(0x4E00 + i % 2000) for i in range(20_001))
        cut, truncated = trim_content(text)
        assert truncated
        assert cut == text[:14_000] + TRUNCATION_MARKER + text[-4_000:]
        assert len(cut) == 14_000 + len(TRUNCATION_MARKER) + 4_000

    def test_head_and_tail_boundaries_are_exact(self) -> None:
        text = "".join(f"{i:06d}" for i in range(10_000))  # 60,000 chars, position-coded
        cut, _ = trim_content(text)
        head, tail = cut.split(TRUNCATION_MARKER)
        assert head == text[:14_000] and head[-1] == text[13_999]
        assert tail == text[56_000:] and tail[0] == text[56_000]

    @pytest.mark.parametrize(
        ("max_chars", "head", "tail"),
        [(10, 7, 2), (11, 7, 2), (15, 10, 3), (99, 69, 19), (100, 70, 20), (3, 2, 0), (1, 0, 0)],
    )
    def test_floor_of_the_ratios(self, max_chars: int, head: int, tail: int) -> None:
        text = "".join(chr(ord("a") + i % 26) for i in range(max_chars + 5))
        cut, truncated = trim_content(text, max_chars)
        assert truncated
        assert cut == text[:head] + TRUNCATION_MARKER + (text[-tail:] if tail else "")

    def test_astral_characters_are_never_split(self) -> None:
        text = "😀" * 30
        cut, _ = trim_content(text, 10)
        assert cut == "😀" * 7 + TRUNCATION_MARKER + "😀" * 2

    def test_bad_limit(self) -> None:
        with pytest.raises(ValueError, match="max_chars"):
            trim_content("abc", 0)

    @given(st.text(max_size=300), st.integers(min_value=1, max_value=200))
    def test_property_head_and_tail_of_the_original(self, text: str, max_chars: int) -> None:
        cut, truncated = trim_content(text, max_chars)
        assert truncated == (len(text) > max_chars)
        if not truncated:
            assert cut == text
        else:
            head, tail = int(max_chars * 0.7), int(max_chars * 0.2)
            assert cut.startswith(text[:head])
            assert cut.endswith(text[len(text) - tail :])
            assert len(cut) == head + len(TRUNCATION_MARKER) + tail


class TestWorkspaceFile:
    def test_records_the_original(self) -> None:
        text = "y" * 25_000
        file = make_workspace_file("AGENTS.md", text)
        assert file.truncated
        assert file.original_length == 25_000
        assert file.original_sha256 == sha256_text(text)
        assert file.max_chars == 20_000
        assert len(file.content) == 18_000 + len(TRUNCATION_MARKER)

    def test_no_limit(self) -> None:
        file = make_workspace_file("big.md", "z" * 50_000, max_chars=None)
        assert not file.truncated and len(file.content) == 50_000


class TestLoading:
    def test_default_files_in_order_missing_skipped(self, tmp_path: Path) -> None:
        (tmp_path / "USER.md").write_text("user", encoding="utf-8")
        (tmp_path / "AGENTS.md").write_text("agents", encoding="utf-8")
        (tmp_path / "SOUL.md").write_text("soul", encoding="utf-8")
        (tmp_path / "README.md").write_text("not a bootstrap file", encoding="utf-8")
        files = load_workspace(tmp_path)
        assert [f.path for f in files] == ["AGENTS.md", "SOUL.md", "USER.md"]
        assert [f.content for f in files] == ["agents", "soul", "user"]

    def test_configured_files_after_defaults(self, tmp_path: Path) -> None:
        (tmp_path / "CLAUDE.md").write_text("claude", encoding="utf-8")
        (tmp_path / "docs").mkdir()
        (tmp_path / "docs" / "RULES.md").write_text("rules", encoding="utf-8")
        outside = tmp_path.parent / f"{tmp_path.name}-extra.md"
        outside.write_text("extra", encoding="utf-8")
        files = load_workspace(tmp_path, files=["docs/RULES.md", outside, "CLAUDE.md"])
        assert [f.path for f in files] == ["CLAUDE.md", "docs/RULES.md", str(outside)]

    def test_each_file_cut_separately(self, tmp_path: Path) -> None:
        (tmp_path / "AGENTS.md").write_text("a" * 30, encoding="utf-8")
        (tmp_path / "SOUL.md").write_text("s" * 5, encoding="utf-8")
        agents, soul = load_workspace(tmp_path, max_chars=10)
        assert agents.content == "a" * 7 + TRUNCATION_MARKER + "a" * 2 and agents.truncated
        assert soul.content == "sssss" and not soul.truncated

    def test_content_kept_byte_exact(self, tmp_path: Path) -> None:
        (tmp_path / "AGENTS.md").write_bytes(b"line one\r\nline two\n\xff")
        (file,) = load_workspace(tmp_path)
        assert file.content == "line one\r\nline two\n\ufffd"

    def test_missing_directory_or_configured_file(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match="workspace directory"):
            load_workspace(tmp_path / "nope")
        with pytest.raises(FileNotFoundError, match="configured bootstrap file"):
            load_workspace(tmp_path, files=["MISSING.md"])


class TestSystemPromptAddition:
    def test_empty(self) -> None:
        assert system_prompt_addition([]) == ""

    def test_sections_in_order(self) -> None:
        files = [
            make_workspace_file("AGENTS.md", "Rules.\n"),
            make_workspace_file("SOUL.md", "Calm."),
        ]
        text = system_prompt_addition(files)
        assert text == (
            "# Project Context\n\nThe following workspace files were loaded for this session.\n\n"
            "## AGENTS.md\n\nRules.\n\n## SOUL.md\n\nCalm."
        )


class TestRecording:
    """On both backends (the PostgreSQL tables are schema/postgres/0003_workspace.sql)."""

    @pytest.fixture(params=BACKENDS)
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
        opened = open_backend(request.param, request, tmp_path)
        try:
            yield opened
        finally:
            opened.close()

    def test_text_no_backend_holds_is_refused_and_nothing_recorded(self, store: Store) -> None:
        s = store.create_session().id
        good = make_workspace_file("AGENTS.md", "rules")
        bad = make_workspace_file("SOUL.md", "x\ud800y")
        with pytest.raises(InvalidEntry, match=r"SOUL\.md.*lone surrogate"):
            store.record_workspace(s, [good, bad])
        assert store.workspace(s) == []

    def test_nul_is_kept_by_sqlite_and_refused_by_postgresql(self, store: Store) -> None:
        s = store.create_session().id
        files = [make_workspace_file("AGENTS.md", "a\x00b")]
        if store.conn.__class__.__name__ == "PgConnection":
            with pytest.raises(InvalidEntry, match="NUL"):
                store.record_workspace(s, files)
            assert store.workspace(s) == []
        else:
            store.record_workspace(s, files)
            assert store.workspace(s) == files

    def test_round_trip(self, store: Store) -> None:
        s = store.create_session().id
        files = [
            make_workspace_file("AGENTS.md", "a" * 30, max_chars=10),
            make_workspace_file("USER.md", "me"),
        ]
        assert store.record_workspace(s, files) == 1
        assert store.workspace(s) == files

    def test_same_files_again_is_a_no_op(self, store: Store) -> None:
        s = store.create_session().id
        files = [make_workspace_file("AGENTS.md", "rules")]
        assert store.record_workspace(s, files) == 1
        assert store.record_workspace(s, files) == 1
        assert store.conn.execute("select count(*) from session_workspace").fetchone()[0] == 1

    def test_changes_make_a_new_load_and_old_loads_stay(self, store: Store) -> None:
        s = store.create_session().id
        first = [make_workspace_file("AGENTS.md", "v1")]
        second = [make_workspace_file("AGENTS.md", "v2"), make_workspace_file("SOUL.md", "v1")]
        store.record_workspace(s, first, loaded_utc="2026-01-01T00:00:00.000Z")
        assert store.record_workspace(s, second, loaded_utc="2026-01-02T00:00:00.000Z") == 2
        assert store.workspace(s) == second
        assert store.workspace(s, load=1) == first
        assert list(store.iter_workspace_loads(s)) == [
            (1, "2026-01-01T00:00:00.000Z"),
            (2, "2026-01-02T00:00:00.000Z"),
        ]

    def test_each_distinct_content_stored_once(self, store: Store) -> None:
        shared = make_workspace_file("AGENTS.md", "shared rules " * 100)
        for _ in range(3):
            s = store.create_session().id
            store.record_workspace(s, [shared, make_workspace_file("USER.md", f"user {s}")])
        assert store.conn.execute("select count(*) from workspace_files").fetchone()[0] == 4
        assert store.conn.execute("select count(*) from session_workspace").fetchone()[0] == 6

    def test_empty_and_unknown(self, store: Store) -> None:
        s = store.create_session().id
        assert store.workspace(s) == []
        assert store.record_workspace(s, []) == 0
        with pytest.raises(SessionNotFound):
            store.record_workspace("nope", [make_workspace_file("AGENTS.md", "x")])
        with pytest.raises(SessionNotFound):
            store.workspace("nope")

    def test_loaded_from_disk_and_rendered(self, store: Store, tmp_path: Path) -> None:
        (tmp_path / "AGENTS.md").write_text("x" * 20_001, encoding="utf-8")
        s = store.create_session(cwd=str(tmp_path)).id
        store.record_workspace(s, load_workspace(tmp_path))
        (file,) = store.workspace(s)
        assert isinstance(file, WorkspaceFile)
        assert file.truncated and file.original_length == 20_001
        assert "[... content truncated ...]" in system_prompt_addition(store.workspace(s))


class TestEngine:
    def test_assemble_offers_the_workspace_and_records_it(
        self, store: Store, tmp_path: Path
    ) -> None:
        engine_module = pytest.importorskip("nexus_store.engine")
        (tmp_path / "AGENTS.md").write_text("Always run the tests.", encoding="utf-8")
        (tmp_path / "SOUL.md").write_text("s" * 20_001, encoding="utf-8")
        engine = engine_module.ContextEngine(store, workspace_dir=tmp_path)
        sid = engine.bootstrap()
        engine.ingest(sid, {"role": "user", "content": "hi", "timestamp": 0})
        result = engine.assemble(sid)
        assert result.system_prompt_addition == system_prompt_addition(load_workspace(tmp_path))
        assert "## AGENTS.md\n\nAlways run the tests." in result.system_prompt_addition
        assert [f.path for f in store.workspace(sid)] == ["AGENTS.md", "SOUL.md"]
        assert store.workspace(sid)[1].truncated
        engine.assemble(sid)  # the same files again: no new load
        assert [n for n, _ in store.iter_workspace_loads(sid)] == [1]
