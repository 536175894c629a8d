"""gc in batches: a crash between batches loses nothing and changes no context, and a
writer in another process never fails while gc runs (issue 18, item 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from tests.reliability_helpers import all_contexts, msg
from tests.workers.gc_worker import NOW

ROOT = Path(__file__).resolve().parents[1]


def build_dead(store: Store, session_id: str, branches: int, depth: int) -> None:
    """A live chain with ``branches`` old dead branches of ``depth`` turns each, and a
    compaction near the leaf (so older turns of the chain go too)."""
    with store.atomic():
        chain: list[str] = []
        for n in range(max(4, branches // 10)):
            chain.append(store.append_entry(session_id, msg(f"live {n}", 10 + n // 50)).id)
        for b in range(branches):
            parent = chain[b % len(chain)]
            for d in range(depth):
                parent = store.append_entry(session_id, msg(f"dead {b}.{d}", 5, parentId=parent)).id
        leaf = chain[-1]
        store.append_compaction(
            session_id,
            "so far",
            chain[-2],
            100,
            parent_id=leaf,
            timestamp="2020-02-01T00:00:00.000Z",
        )
        store.append_entry(session_id, msg("after", 800))


def _contexts(db: Path) -> dict[str, dict[str, Any]]:
    with Store(db) as store:
        return {s.id: all_contexts(store, s.id) for s in store.list_sessions()}


def _sound(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
        assert conn.execute("pragma foreign_key_check").fetchall() == []
    finally:
        conn.close()
    with Store(db) as store:
        report = store.doctor()
        assert report.ok, report.findings


def _turn_ids(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("select uid from turns")}
    finally:
        conn.close()


def _worker(db: Path, mode: str, log: Path, arg: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers.gc_worker", str(db), mode, str(log), arg],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _lines(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]


def _written(log: Path) -> bool:
    """Whether the writer has committed an append (or stopped with an error)."""
    return any("id" in x or "error" in x for x in _lines(log))


@pytest.fixture
def dead_db(tmp_path: Path) -> Path:
    db = tmp_path / "gc.db"
    with Store(db, counter="chars4") as store:
        for s in range(2):
            sid = store.create_session(id=f"s{s}").id
            build_dead(store, sid, branches=150, depth=4)
    return db


class TestCrashBetweenBatches:
    def test_kill_between_batches_then_gc_again_finishes_the_same(
        self, dead_db: Path, tmp_path: Path
    ) -> None:
        reference = tmp_path / "reference.db"
        shutil.copy(dead_db, reference)
        with Store(reference) as store:
            report = store.gc(
                all_sessions=True, dead_branches_older_than=30, compacted_older_than=30, now=NOW
            )
        assert report.dead_branch_turns == 2 * 150 * 4 and report.compacted_turns > 0
        expected = _turn_ids(reference)
        before = _contexts(dead_db)
        for kill in range(3):  # kill it three times, each after a few batches
            log = tmp_path / f"gc{kill}.log"
            proc = _worker(dead_db, "gc", log, "40")
            deadline = time.monotonic() + 60
            while len(_lines(log)) < 3 + kill and time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            lines = _lines(log)
            assert not any("finished" in x for x in lines), "gc ended before the kill"
            _sound(dead_db)
            now = _contexts(dead_db)
            for session, contexts in before.items():
                for leaf, context in now[session].items():
                    if leaf in contexts:  # every context still there is unchanged
                        assert context == contexts[leaf]
        assert len(_turn_ids(dead_db)) < len(_turn_ids(reference)) + report.dead_branch_turns
        with Store(dead_db) as store:
            store.gc(
                all_sessions=True, dead_branches_older_than=30, compacted_older_than=30, now=NOW
            )
        assert _turn_ids(dead_db) == expected
        _sound(dead_db)


class TestConcurrentWriter:
    @pytest.mark.parametrize("target", ["other", "s0"])
    def test_a_writer_never_fails_during_gc(
        self, dead_db: Path, tmp_path: Path, target: str
    ) -> None:
        with Store(dead_db) as store:
            if target == "other":
                store.create_session(id="other")
            before_ids = _turn_ids(dead_db)
        log = tmp_path / "writer.log"
        writer = _worker(dead_db, "write", log, target)
        try:
            # Wait for a committed append, not the "ready" line: the store builds its
            # append part (and imports it) on the first append, which may take longer
            # than the whole gc on a loaded machine.
            deadline = time.monotonic() + 30
            while not _written(log) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _written(log), "the writer did not start"
            with Store(dead_db) as store:
                report = store.gc(
                    all_sessions=True,
                    dead_branches_older_than=30,
                    compacted_older_than=30,
                    now=NOW,
                    batch_size=50,
                )
            time.sleep(0.2)
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
        lines = _lines(log)
        assert not [x for x in lines if "error" in x], lines[-1]
        written = [x["id"] for x in lines if "id" in x]
        assert len(written) > 10  # it really wrote while gc ran
        remaining = _turn_ids(dead_db)
        assert set(written) <= remaining  # nothing a writer committed was removed
        assert report.dead_branch_turns > 0
        if target == "s0":
            # the session written to keeps the rest of its plan; the other is done
            assert any("written to during gc" in a for a in report.actions)
            assert len(remaining - set(written)) < len(before_ids)
        _sound(dead_db)
