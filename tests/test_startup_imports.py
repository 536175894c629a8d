"""`nexus-store context status` imports only what it needs (issue 17: start-up).

Each check runs a fresh interpreter and asserts which modules are loaded: a
semantic guard on the lazy imports (the timing lives in benchmarks/bench_startup.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nexus_store import Store

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


def _loaded(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


class TestLazyImports:
    def test_importing_the_cli_loads_no_store_and_no_pydantic(self) -> None:
        loaded = _loaded("import nexus_store.cli")
        assert "pydantic" not in loaded
        assert "nexus_store.store.facade" not in loaded
        assert [m for m in HEAVY if m in loaded] == []

    def test_context_status_loads_only_what_it_needs(self, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            sid = store.create_session(cwd="/r").id
            store.append_message(sid, {"role": "user", "content": "hi", "timestamp": 0})
        code = (
            "from nexus_store.cli import cli\n"
            f"cli(['--db', {str(db)!r}, 'context', 'status', {sid!r}], standalone_mode=False)"
        )
        loaded = _loaded(code)
        assert "nexus_store.store.reading" in loaded  # it did run
        assert [m for m in HEAVY if m in loaded] == []
        assert "nexus_store.cli.transfer" not in loaded

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
