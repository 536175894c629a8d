"""`nexus-store context status` imports only what it needs (issue 17: start-up).

Each import check runs a fresh interpreter and asserts which modules are loaded: a
semantic guard on the lazy imports (the timing lives in benchmarks/bench_startup.py).
The status command reads its figures without pydantic (`nexus_store.store.status`);
the other tests here check that those figures, and the command's output, are what
`Store.status` gives.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import subprocess
import sys
import unicodedata
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.cli import _common, cli
from nexus_store.compaction.policy import CompactionConfig, LayerConfig
from nexus_store.degradation import percent_threshold
from nexus_store.errors import SessionNotFound
from nexus_store.models import ContextStatus
from nexus_store.store.opening import open_handle
from nexus_store.store.status import (
    DEFAULT_LIMITS,
    StatusFigures,
    resolve_session_id,
    status_figures,
)

ROOT = Path(__file__).resolve().parents[1]
HEAVY = [
    "sqlite_utils",
    "numpy",
    "httpx",
    "tiktoken",
    "nexus_store.formats",
    "nexus_store.compaction.plan",
    "nexus_store.compaction.runner",
    "nexus_store.compaction.summarizer",
    "nexus_store.store.importing",
    "nexus_store.store.gc",
    "nexus_store.store.copy",
    "nexus_store.store.doctor",
]
# What `context status` must not import at all (each with its submodules): pydantic
# alone was about 180 ms of CPU at start-up.
NOT_FOR_STATUS = [
    *HEAVY,
    "pydantic",
    "pydantic_core",
    "nexus_store.models",
    "nexus_store.compaction",
    "nexus_store.store.reading",
    "nexus_store.store.appends",
    "nexus_store.cli.transfer",
    # what it opens without (fourth session): the facade and its parts, the PostgreSQL
    # adapter, the zstd bindings (until a compressed value is read), the CLI's views
    "nexus_store.store.facade",
    "nexus_store.store.facade_docs",
    "nexus_store.store.parts",
    "nexus_store.store.pg",
    "psycopg",
    "zstandard",
    "compression",
    "nexus_store.cli.views",
]
# The zstd binding that reads compressed content: zstandard, or the standard
# library's on Python 3.14+.
ZSTD = ["zstandard", "compression"]


def _loaded(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _among(loaded: set[str], names: list[str]) -> list[str]:
    """The loaded modules that are one of ``names`` or inside one of them."""
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in names))


def _cli_code(*args: str) -> str:
    return f"from nexus_store.cli import cli\ncli({list(args)!r}, standalone_mode=False)"


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, str, list[str]]:
    """A session with two compactions on its path and a branch; its turn ids in order."""
    db = tmp_path / "s.db"
    with Store(db, counter="chars4") as store:
        sid = store.create_session(cwd="/r").id
        ids = []
        for n in range(6):
            text = f"message {n} " + "x" * (40 * n)
            ids.append(store.append_message(sid, {"role": "user", "content": text}).id)
        ids.append(store.append_compaction(sid, "first", ids[2], 120).id)
        ids.append(store.append_message(sid, {"role": "user", "content": "after " * 30}).id)
        ids.append(
            store.append_compaction(
                sid, "second", ids[7], 1_234, tokensAfter=56, trigger="auto", layer="full"
            ).id
        )
        ids.append(store.append_message(sid, {"role": "user", "content": "tail"}).id)
        store.navigate(sid, ids[3])
        ids.append(store.append_message(sid, {"role": "user", "content": "branch"}).id)
    return db, sid, ids


class TestLazyImports:
    def test_importing_the_cli_loads_no_store_and_no_pydantic(self) -> None:
        loaded = _loaded("import nexus_store.cli")
        assert "pydantic" not in loaded
        assert "nexus_store.store.facade" not in loaded
        assert [m for m in HEAVY if m in loaded] == []

    @pytest.mark.parametrize("extra", [[], ["--json"], ["--window", "1000"]])
    def test_context_status_loads_neither_pydantic_nor_compaction(
        self, compacted: tuple[Path, str, list[str]], extra: list[str]
    ) -> None:
        db, sid, _ = compacted
        loaded = _loaded(_cli_code("--db", str(db), "context", "status", sid, *extra))
        assert "nexus_store.store.status" in loaded  # it did run
        assert _among(loaded, NOT_FOR_STATUS) == []

    def test_a_session_by_prefix_or_latest_loads_no_pydantic(
        self, compacted: tuple[Path, str, list[str]]
    ) -> None:
        db, sid, ids = compacted
        for ref, leaf in ((sid[:6], ids[4]), ("latest", ids[-1])):
            code = _cli_code("--db", str(db), "context", "status", ref, "--leaf", leaf)
            assert _among(_loaded(code), NOT_FOR_STATUS) == []

    def test_the_guard_sees_pydantic_when_it_is_imported(
        self, compacted: tuple[Path, str, list[str]]
    ) -> None:
        db, sid, _ = compacted  # the check itself can fail: `context show` needs the models
        loaded = _loaded(_cli_code("--db", str(db), "context", "show", sid))
        assert "pydantic" in _among(loaded, NOT_FOR_STATUS)

    def test_compressed_content_loads_zstd_only_when_read(self, tmp_path: Path) -> None:
        db = tmp_path / "big.db"
        with Store(db, counter="chars4") as store:
            sid = store.create_session().id
            store.append_message(sid, {"role": "user", "content": "long " * 400})
            assert store.db is not None  # it is stored compressed: the test means something
            assert store.db.execute("select count(content_zstd) from messages").fetchone() == (1,)
        status = _loaded(_cli_code("--db", str(db), "context", "status", sid))
        assert "nexus_store.store.status" in status
        assert _among(status, NOT_FOR_STATUS) == []
        # the guard can fail: reading the message decompresses it
        shown = _loaded(_cli_code("--db", str(db), "context", "show", sid))
        assert _among(shown, ZSTD) != []

    def test_status_compiles_no_pattern_for_its_text(
        self, compacted: tuple[Path, str, list[str]]
    ) -> None:
        db, sid, ids = compacted
        code = _cli_code("--db", str(db), "context", "status", sid, "--leaf", ids[9])
        code += "\nfrom nexus_store import jsoncodec\nfrom nexus_store.cli import _common"
        code += "\nprint(_common._pattern.cache_info().currsize, jsoncodec._pattern.cache_info().currsize)"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        )
        assert "Last compaction:" in done.stdout  # (its lines hold non-ASCII: → and —)
        assert done.stdout.splitlines()[-1] == "0 0"

    def test_open_handle_takes_the_defaults_of_store(self) -> None:
        ours = inspect.signature(open_handle).parameters
        theirs = inspect.signature(Store.__init__).parameters
        names = ["memory", "counter", "synchronous", "busy_timeout"]
        assert [ours[n].default for n in names] == [theirs[n].default for n in names]

    def test_sqlite_utils_is_still_there_when_asked_for(self, tmp_path: Path) -> None:
        with Store(tmp_path / "s.db") as store:
            assert store.db is not None
            assert "sessions" in store.db.table_names()
            assert store.db.conn is store.handle._conn

    def test_help_on_the_class_shows_the_parts_docs(self) -> None:
        out = subprocess.run(
            [sys.executable, "-c", "from nexus_store import Store; print(Store.gc.__doc__)"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout
        assert "Args:" in out


class TestOneSourceOfFigures:
    def test_the_figures_are_the_fields_of_context_status(self) -> None:
        assert list(StatusFigures._fields) == list(ContextStatus.model_fields)

    def test_default_limits_are_the_default_configs(self) -> None:
        assert CompactionConfig().risk_limits == DEFAULT_LIMITS

    def test_the_cli_prints_what_store_status_gives(
        self, compacted: tuple[Path, str, list[str]]
    ) -> None:
        db, sid, ids = compacted
        runner = CliRunner()
        with Store(db) as store:
            for leaf in [None, *ids]:
                for window in (200_000, 1_000, 300):
                    args = ["--db", str(db), "context", "status", sid, "--window", str(window)]
                    args += ["--json"] + ([] if leaf is None else ["--leaf", leaf])
                    result = runner.invoke(cli, args)
                    assert result.exit_code == 0, result.output
                    expected = store.status(sid, leaf, window=window).model_dump()
                    assert json.loads(result.output) == expected

    def test_a_config_reaches_the_figures(self, compacted: tuple[Path, str, list[str]]) -> None:
        db, sid, ids = compacted
        cfg = CompactionConfig(
            context_window=1_000,
            reserve_tokens_floor=100,
            soft_threshold_tokens=0,
            warn_at_compaction=2,
            layers=(LayerConfig(name="full", trigger_percent=10, protect_recent_tokens=1),),
        )
        with Store(db) as store:
            for leaf, ours, default in ((ids[9], "high", "medium"), (ids[5], "medium", "low")):
                status = store.status(sid, leaf, config=cfg)
                figures = status_figures(store.handle, sid, leaf, limits=cfg.risk_limits)
                assert status.model_dump() == figures.as_dict()
                assert (figures.window, figures.threshold, figures.risk) == (1_000, 900, ours)
                plain = status_figures(store.handle, sid, leaf)
                assert (plain.window, plain.threshold, plain.risk) == (200_000, 176_000, default)

    def test_the_text_output(self, compacted: tuple[Path, str, list[str]]) -> None:
        db, sid, ids = compacted
        out = CliRunner().invoke(
            cli, ["--db", str(db), "context", "status", sid[:8], "--leaf", ids[9]]
        )
        assert out.exit_code == 0, out.output
        with Store(db) as store:
            tokens = store.status(sid, ids[9]).tokens
            stamp = store.get_turn(sid, ids[8]).timestamp
        percent = f"{tokens / 200_000 * 100:.1f}"
        assert out.output.splitlines() == [
            f"Context status  session {sid}  leaf {ids[9]}",
            f"Tokens:          {tokens:,} / 200,000 ({percent}%)",
            "Auto-compact at: 176,000 tokens",
            "Compactions:     2 on this path",
            f"Last compaction: {ids[8]} at {stamp} (auto, full) 1,234 → 56 tokens",
            "Degradation:     medium — Compacted 2 times; context is still healthy.",
        ]


class TestPercentThreshold:
    """The integer arithmetic of `percent_threshold` against `fractions` (its reference)."""

    @given(
        st.one_of(
            st.floats(min_value=1e-9, max_value=100),
            st.decimals(min_value=0, max_value=100, places=3).map(float),
            st.integers(min_value=1, max_value=100),
        ),
        st.integers(min_value=1, max_value=10**8),
    )
    def test_as_fractions_of_its_text(self, percent: float, window: int) -> None:
        expected = math.ceil(window * Fraction(str(float(percent))) / 100)
        assert percent_threshold(percent, window) == expected

    def test_the_guard_loads_no_fractions(self) -> None:
        loaded = _loaded(
            "from nexus_store.degradation import assess, RiskLimits\n"
            "assess(2, RiskLimits(), tokens=170_000)"
        )
        assert "fractions" not in loaded and "pydantic" not in loaded


class TestResolve:
    def test_by_id_prefix_and_latest(self, compacted: tuple[Path, str, list[str]]) -> None:
        db, sid, _ = compacted
        with Store(db) as store:
            other = store.create_session(id=sid[:4] + "-other").id
            found = {
                ref: resolve_session_id(store.handle, ref) for ref in (sid, sid[:6], other[:6])
            }
            assert found == {sid: sid, sid[:6]: sid, other[:6]: other}
            latest = store.list_sessions(limit=1)[0].id
            assert resolve_session_id(store.handle, "latest") == latest
            assert store.resolve_session(sid[:6]).id == sid

    @pytest.mark.parametrize(
        ("ref", "message"),
        [
            ("zzz", "no session with id or id prefix 'zzz'"),
            ("%", "no session with id or id prefix '%'"),
            ("\udcff", "no session with id or id prefix"),
            ("", "is the prefix of several sessions"),
            ("PREFIX", "is the prefix of several sessions"),
        ],
    )
    def test_not_found_or_ambiguous(
        self, compacted: tuple[Path, str, list[str]], ref: str, message: str
    ) -> None:
        db, sid, _ = compacted
        ref = sid[:4] if ref == "PREFIX" else ref
        with Store(db) as store:
            other = store.create_session(id=sid[:4] + "-other").id
            with pytest.raises(SessionNotFound, match=message.replace("(", r"\(")) as err:
                resolve_session_id(store.handle, ref)
            if "several" in message:
                assert sid in str(err.value) and other in str(err.value)

    def test_latest_in_an_empty_database(self, tmp_path: Path) -> None:
        with Store(tmp_path / "e.db") as store, pytest.raises(SessionNotFound, match="no sessions"):
            resolve_session_id(store.handle, "latest")


class TestTerminalSafeWithoutPatterns:
    """The CLI compiles its terminal-safety patterns only for text that is not printable."""

    @pytest.mark.parametrize("source", [_common._UNSAFE, _common._JSON_UNSAFE])
    def test_every_character_the_patterns_escape_is_not_printable(self, source: str) -> None:
        every = "".join(map(chr, range(0x110000)))
        matched = re.findall(source, every)
        assert len(matched) > 30  # the pattern is what the test reads
        assert [c for c in matched if c.isprintable()] == []
        assert {unicodedata.category(c) for c in matched} <= {"Cc", "Cf"}

    @given(st.text())
    def test_the_same_as_the_pattern(self, text: str) -> None:
        escape = _common._escape
        assert _common.terminal_safe(text) == re.sub(_common._UNSAFE, escape, text)

    def test_what_it_escapes(self) -> None:
        assert _common.terminal_safe("ok → fine") == "ok → fine"
        assert _common.terminal_safe("a\x1b[2Jb\u202ec\td\n") == "a\\x1b[2Jb\\u202ec\td\n"

    def test_json_text(self, capsys: pytest.CaptureFixture[str]) -> None:
        _common.echo_json_text('"plain — text"')
        _common.echo_json_text('{\n  "a": "x\x9by\u2066"\n}')
        assert capsys.readouterr().out.splitlines() == [
            '"plain — text"',
            "{",
            '  "a": "x\\u009by\\u2066"',
            "}",
        ]
