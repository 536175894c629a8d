"""Load: writers (two on one session, two on their own) and readers as real processes
on one database file for a bounded time. Nothing is lost or duplicated, no error (no
"database is locked") reaches a caller, and every context read is consistent.

The full minute: ``PYTHONPATH=. python -m tests.workers.load --duration 60``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.workers.load import run_load

DURATION = float(os.environ.get("NEXUS_LOAD_SECONDS", "10"))


@pytest.mark.slow
def test_processes_writing_and_reading_at_once_lose_nothing(tmp_path: Path) -> None:
    report = run_load(tmp_path / "load.db", duration=DURATION)
    print(json.dumps(report, indent=2))  # the figures, for the record (pytest -s)
    assert report["problems"] == []
    assert report["turns"] > 100 and report["contexts"] > 10 and report["sql_queries"] > 5
    assert report["shared_session_leaves"] >= 1


@pytest.mark.slow
def test_many_writers_on_one_session_with_short_busy_timeout(tmp_path: Path) -> None:
    # Six writers on one session: the lock is contended all the time; the store's
    # retry with backoff must keep "database is locked" from every caller.
    report = run_load(
        tmp_path / "busy.db",
        duration=min(DURATION, 5),
        shared_writers=5,
        own_writers=0,
        readers=2,
        busy_timeout=0.01,
    )
    print(json.dumps(report, indent=2))
    assert report["problems"] == []
