"""A new user's first hour (issue 15): each item reproduced as the issue wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli


def run(runner: CliRunner, db: Path, *args: str, input: str | None = None) -> click.testing.Result:
    return runner.invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)


def transcript(path: Path, session: str, stamps: list[str]) -> Path:
    """A pi v3 transcript: a header, then one user message per timestamp."""
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session, "timestamp": stamps[0]}
    ]
    parent = None
    for n, stamp in enumerate(stamps):
        uid = f"{session}-{n}"
        lines.append(
            {
                "type": "message",
                "id": uid,
                "parentId": parent,
                "timestamp": stamp,
                "message": {"role": "user", "content": f"message {n}", "timestamp": 0},
            }
        )
        parent = uid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def session_rows(db: Path) -> list[tuple[Any, ...]]:
    with Store(db) as store:
        return store.conn.execute("select * from sessions order by id").fetchall()


class TestLatestFollowsTheConversation:
    """Item 3: `latest` is the newest conversation; an import that adds nothing changes nothing."""

    def test_latest_is_the_newest_turn_not_the_last_file(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        recent = transcript(tmp_path / "recent.jsonl", "recent", ["2026-03-01T10:00:00.000Z"])
        old = transcript(tmp_path / "old.jsonl", "old", ["2025-01-01T10:00:00.000Z"])
        assert run(runner, db, "import", str(recent), "-q").exit_code == 0
        assert run(runner, db, "import", str(old), "-q").exit_code == 0  # imported last
        listed = json.loads(run(runner, db, "sessions", "--json").output)
        assert [s["id"] for s in listed] == ["recent", "old"]
        assert listed[0]["updated_utc"] == "2026-03-01T10:00:00.000Z"
        tree = json.loads(run(runner, db, "tree", "latest", "--json").output)
        assert tree["session"] == "recent"

    def test_reimport_of_an_unchanged_file_changes_nothing(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        path = transcript(
            tmp_path / "a.jsonl", "a", ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
        )
        assert run(runner, db, "import", str(path), "-q").exit_code == 0
        before = session_rows(db)
        result = run(runner, db, "import", str(path), "--json")
        assert json.loads(result.output)["turns"] == 0
        assert session_rows(db) == before

    def test_reimport_keeps_a_navigated_leaf(self, runner: CliRunner, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        path = transcript(
            tmp_path / "a.jsonl", "a", ["2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
        )
        run(runner, db, "import", str(path), "-q")
        assert run(runner, db, "navigate", "a", "a-0").exit_code == 0
        before = session_rows(db)
        run(runner, db, "import", str(path), "-q")
        assert session_rows(db) == before

    def test_a_longer_file_moves_updated_to_its_newest_turn(
        self, runner: CliRunner, tmp_path: Path
    ) -> None:
        db = tmp_path / "s.db"
        stamps = ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"]
        run(runner, db, "import", str(transcript(tmp_path / "a.jsonl", "a", stamps[:1])), "-q")
        run(runner, db, "import", str(transcript(tmp_path / "a.jsonl", "a", stamps)), "-q")
        (session,) = json.loads(run(runner, db, "sessions", "--json").output)
        assert session["updated_utc"] == stamps[1] and session["turn_count"] == 2


class TestStatusRisk:
    """Item 4: risk and recommendation take the fill level and the trigger formula into account."""

    @pytest.fixture
    def full(self, tmp_path: Path) -> tuple[Path, str]:
        db = tmp_path / "s.db"
        with Store(db, counter="chars4") as store:
            s = store.create_session(id="full")
            store.append_message(s.id, {"role": "user", "content": "x" * (208_931 * 4)})
        return db, s.id

    def test_overflowing_context_is_not_healthy(
        self, runner: CliRunner, full: tuple[Path, str]
    ) -> None:
        db, session = full
        out = run(runner, db, "context", "status", session).output
        assert "208,931 / 200,000 (104.5%)" in out
        assert "healthy" not in out
        assert "Degradation:     critical" in out and "does not fit" in out
        status = json.loads(run(runner, db, "context", "status", session, "--json").output)
        assert status["risk"] == "critical" and "compact" in status["recommendation"]

    @pytest.mark.parametrize(
        ("window", "risk", "words"),
        [
            (300_000, "low", "healthy"),  # 70%
            (250_000, "medium", "nearing"),  # 84%: past the lowest layer (80%)
            (220_000, "high", "trigger"),  # 95%: past 220,000 - 20,000 - 4,000
            (208_931, "critical", "does not fit"),  # exactly full
        ],
    )
    def test_fill_levels(self, full: tuple[Path, str], window: int, risk: str, words: str) -> None:
        db, session = full
        with Store(db) as store:
            status = store.status(session, window=window)
        assert status.risk == risk and words in status.recommendation

    def test_the_higher_risk_wins_and_both_are_said(self) -> None:
        from nexus_store.policy import CompactionConfig, evaluate_degradation

        cfg = CompactionConfig()
        d = evaluate_degradation(3, cfg, tokens=180_000)
        assert d.risk == "high"
        assert "trigger (176,000" in d.recommendation and "Compacted 3 times" in d.recommendation
        assert evaluate_degradation(5, cfg, tokens=10).risk == "critical"
        assert evaluate_degradation(0, cfg).risk == "low"  # no tokens: the count alone
