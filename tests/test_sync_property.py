"""Property: a transcript synced in arbitrary pieces (half lines included) equals one import of it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nexus_store import Store
from nexus_store.sync import sync_paths
from tests.conftest import corpus_dir
from tests.reference import reference_context
from tests.test_assembly_property import trees


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(st.floats(0, 1), max_size=6))
def test_syncing_a_growing_file_in_pieces_equals_one_import(
    entries: list[dict[str, Any]], cuts: list[float]
) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": "prop",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/",
    }
    data = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in [header, *entries]).encode()
    points = sorted({int(c * len(data)) for c in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prop.jsonl"
        path.write_bytes(b"")
        with (
            Store(memory=True, counter="chars4") as synced,
            Store(memory=True, counter="chars4") as whole,
        ):
            written = 0
            for point in points:
                with open(path, "ab") as f:
                    f.write(data[written:point])  # may end in the middle of a line
                written = point
                report = sync_paths(synced, [path])
                assert report.errors == [] and report.reread == [] and report.skipped == 0
            whole.import_jsonl(path)
            got = list(synced.iter_export_entries("prop"))
            assert got == list(whole.iter_export_entries("prop"))
            for e in entries:
                assert (
                    synced.context("prop", e["id"]).messages
                    == reference_context(entries, e["id"])["messages"]
                )


def _corpus_files() -> list[Path]:
    from tests.conftest import CORPUS

    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*.jsonl") if p.read_bytes().endswith(b"\n"))


def _usage(store: Store) -> tuple[int, int]:
    row = store.conn.execute(
        "select coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) from messages"
    ).fetchone()
    return int(row[0]), int(row[1])


@pytest.mark.parametrize("source", _corpus_files(), ids=lambda p: p.name[:60])
def test_real_transcripts_synced_in_three_pieces_equal_one_import(
    source: Path, tmp_path: Path
) -> None:
    corpus_dir()  # skips where the corpus is absent
    data = source.read_bytes()
    path = tmp_path / source.name
    path.write_bytes(b"")
    with (
        Store(memory=True, counter="chars4") as synced,
        Store(memory=True, counter="chars4") as whole,
    ):
        written = 0
        for point in (len(data) // 3 + 7, 2 * len(data) // 3 + 3, len(data)):
            with open(path, "ab") as f:
                f.write(data[written:point])
            written = point
            report = sync_paths(synced, [path])
            assert report.errors == [] and report.reread == []
        whole.import_jsonl(path)
        assert [s.id for s in synced.list_sessions()] == [s.id for s in whole.list_sessions()]
        for session in whole.list_sessions():
            assert list(synced.iter_export_entries(session.id)) == list(
                whole.iter_export_entries(session.id)
            )
        assert _usage(synced) == _usage(
            whole
        )  # Claude Code responses split across pieces count once
