"""Crashes: a writer killed with SIGKILL at random points of an append burst, of
imports (`Store.ingest`) and of compactions, many times over one database file.
After each kill: integrity_check passes, every logged (committed) write is there,
no import is half stored, no compaction half written, and doctor finds nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from tests.workers.crash_worker import INGEST_SIZE

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("NEXUS_CRASH_RUNS", "10"))


def _kill_at_random(db: Path, mode: str, log: Path, rng: random.Random) -> list[dict[str, Any]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.workers.crash_worker",
            str(db),
            mode,
            str(log),
            str(rng.random()),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until it writes, then kill at a random moment
        if log.exists() and log.read_text().count("\n") >= 3:
            break
        if proc.poll() is not None:
            pytest.fail(f"crash worker exited early with {proc.returncode}")
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.3))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = log.read_text().splitlines()
    log.unlink()
    # The last line may be cut short by the kill: only whole lines were logged.
    return [json.loads(x) for x in lines if x.endswith("}")]


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("pragma integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["append", "ingest", "compact"])
def test_kill_minus_9_loses_no_committed_write(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(f"{mode}-{os.getpid()}")
    logged_total = in_flight = 0
    imported: set[str] = set()
    for run in range(RUNS):
        records = _kill_at_random(db, mode, tmp_path / f"run{run}.log", rng)
        in_flight += "start" in records[-1]  # the kill landed inside a write call
        assert _integrity(db) == "ok", f"run {run}"
        with Store(db, counter="chars4") as store:
            if mode == "ingest":
                imported |= {r["session"] for r in records if "source" in r}
                _check_ingests(store, imported, kills=run + 1)
            else:
                _check_turns(store, records, compact=mode == "compact")
            report = store.doctor()
            assert report.ok, (run, report.findings)
        logged_total += len(records)
    print(f"{mode}: {RUNS} kills, {in_flight} inside a write call, {logged_total} writes logged")
    assert logged_total > RUNS  # the kills landed mid-burst, not before the first write
    assert in_flight >= RUNS // 3  # and most of them inside a write, not between two


def _check_turns(store: Store, records: list[dict[str, Any]], *, compact: bool) -> None:
    session = records[0]["session"]
    turns = {t.id: t for t in store.iter_turns(session)}
    logged = [r for r in records if "id" in r]
    missing = [r["id"] for r in logged if r["id"] not in turns]
    assert missing == [], "committed turns lost"
    assert len(turns) - len(logged) in (0, 1)  # at most the one in flight at the kill
    # the turns form one chain (each append is a child of the active leaf)
    assert len(store.leaves(session)) == min(1, len(turns))
    leaf = store.get_session(session).active_leaf
    assert leaf == max(turns.values(), key=lambda t: t.seq).id if turns else leaf is None
    for turn in turns.values():
        if turn.kind == "compaction":  # all of it or nothing: every column written
            assert turn.entry["summary"].startswith("summary") and turn.compaction_id == turn.id
            ctx = store.context(session, turn.id)
            assert ctx.messages[0]["role"] == "compactionSummary"
    if compact:
        assert store.context(session).tokens == turns[leaf].context_tokens  # type: ignore[index]


def _check_ingests(store: Store, logged: set[str], *, kills: int) -> None:
    stored = {s.id: s for s in store.list_sessions() if s.source_format == "crashtest"}
    assert logged <= set(stored), "a committed import is gone"
    for session in stored.values():  # every import is all or nothing
        assert session.turn_count == INGEST_SIZE, f"{session.id} half imported"
    assert len(stored) - len(logged) <= kills  # at most one in flight per kill
