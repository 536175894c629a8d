"""Shared fixtures: an in-memory store, a file store, a CLI runner, an isolated NEXUS_STORE_DB."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from nexus_store import Store

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
if not SHARED.is_dir():
    SHARED = Path("/work/shared")
CORPUS = SHARED / "corpus"


@pytest.fixture(autouse=True)
def _isolated_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXUS_STORE_DB", str(tmp_path / "env.db"))


@pytest.fixture
def store() -> Iterator[Store]:
    with Store(memory=True, counter="chars4") as s:
        yield s


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def corpus_dir() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent (a user's clone has none)")
    return CORPUS
