"""Import and export through the store: corpus conformance, round trips, idempotence, atomicity."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from nexus_store import Store, TranscriptError
from nexus_store.store import appends
from tests.conftest import corpus_dir
from tests.reference import reference_context
from tests.test_assembly_property import trees


def pi_files() -> list[Path]:
    root = corpus_dir()
    return sorted(p for folder in ("pi", "pi-synthetic") for p in (root / folder).glob("*.jsonl"))


def raw_objects(path: Path) -> list[dict[str, Any]]:
    """The file's JSON objects, split where glued, skipping what pi skips."""
    out: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    for line in path.read_bytes().decode("utf-8", "replace").split("\n"):
        text = line.strip()
        while text:
            try:
                value, end = decoder.raw_decode(text)
            except json.JSONDecodeError:
                break
            if isinstance(value, dict):
                out.append(value)
            text = text[end:].lstrip()
    return out


class TestCorpus:
    def test_every_file_imports_and_counts_match(self, tmp_path: Path) -> None:
        root = corpus_dir()
        with Store(tmp_path / "c.db", counter="chars4") as store:
            for path in sorted(root.rglob("*.jsonl")):
                report = store.import_paths([path])
                assert not report.errors, report.errors
                (sid,) = report.sessions
                turns = store.conn.execute(
                    "select count(*) from turns t join sessions s on s.id = t.session_id where s.uid = ?",
                    [sid],
                ).fetchone()[0]
                assert turns == report.turns
                skipped_entries = sum(
                    1 for p in report.problems if p["kind"] in ("duplicate_id", "conflict")
                )
                assert report.turns == report.entries - skipped_entries, path.name
                msgs = store.conn.execute(
                    "select count(*) from messages m join turns t on t.id = m.turn_id "
                    "join sessions s on s.id = t.session_id where s.uid = ? and t.kind = 'message'",
                    [sid],
                ).fetchone()[0]
                assert msgs == report.messages
                # every line of the file is an entry, a header, or a reported problem
                objects = raw_objects(path)
                headers = 1 if objects and objects[0].get("type") in ("session",) else 0
                if path.parent.name.startswith("pi"):
                    assert report.entries == len(objects) - headers, path.name
                # importing again changes nothing
                again = store.import_paths([path])
                assert again.turns == 0 and again.conflicts == 0, path.name

    @pytest.mark.parametrize("path", pi_files(), ids=lambda p: p.name)
    def test_context_of_every_leaf_matches_pi_on_the_original_file(
        self, path: Path, store: Store
    ) -> None:
        (sid,) = store.import_jsonl(path)
        objects = raw_objects(path)
        header = objects[0] if objects and objects[0].get("type") == "session" else None
        entries = [o for o in objects if o.get("type") != "session"]
        if header is not None and header.get("version", 1) < 2:
            # pi's migrateV1ToV2: chain in file order; ids as the importer generated them
            stored = [t.id for t in store.iter_turns(sid)]
            for e, uid, prev in zip(entries, stored, [None, *stored[:-1]], strict=True):
                e["id"], e["parentId"] = uid, prev
                if e.get("type") == "compaction" and isinstance(e.get("firstKeptEntryIndex"), int):
                    idx = e.pop("firstKeptEntryIndex")
                    if 0 < idx <= len(entries):
                        e["firstKeptEntryId"] = stored[idx - 1]
        for e in entries:
            if e.get("type") == "message" and e["message"].get("role") == "hookMessage":
                e["message"]["role"] = "custom"
        leaves = [t.id for t in store.leaves(sid)]
        assert leaves
        for leaf in leaves:
            want = reference_context(entries, leaf)
            got = store.context(sid, leaf)
            assert got.messages == want["messages"], leaf
            assert got.model == want["model"]

    @pytest.mark.parametrize("path", pi_files(), ids=lambda p: p.name)
    def test_v3_files_export_back_line_for_line(self, path: Path, store: Store) -> None:
        objects = raw_objects(path)
        if not objects or objects[0].get("version") != 3:
            pytest.skip("only pi v3 files round-trip line for line (v1/v2 export as v3)")
        (sid,) = store.import_jsonl(path)
        out = io.StringIO()
        store.export_jsonl(sid, out)
        exported = [json.loads(line) for line in out.getvalue().split("\n") if line]
        assert exported == objects


def _write(path: Path, header: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    with path.open("w") as f:
        for obj in [header, *entries]:
            f.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


HEADER = {
    "type": "session",
    "version": 3,
    "id": "gen",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/w",
}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(trees())
def test_round_trip_idempotence_and_growth(tmp_path: Path, entries: list[dict[str, Any]]) -> None:
    path = tmp_path / "gen.jsonl"
    with Store(memory=True, counter="chars4") as store:
        half = max(1, len(entries) // 2)
        _write(path, HEADER, entries[:half])
        first = store.import_paths([path])
        assert first.turns == half
        _write(path, HEADER, entries)  # the same file, grown
        grown = store.import_paths([path])
        assert grown.turns == len(entries) - half and grown.conflicts == 0
        again = store.import_paths([path])
        assert again.turns == 0 and again.conflicts == 0
        out = io.StringIO()
        store.export_jsonl(first.sessions[0], out)
        assert [json.loads(x) for x in out.getvalue().split("\n") if x] == [HEADER, *entries]


class TestAtomicity:
    def test_strict_stores_nothing_of_a_bad_file(self, tmp_path: Path, store: Store) -> None:
        path = tmp_path / "bad.jsonl"
        lines = [json.dumps(HEADER)]
        lines += [
            json.dumps(
                {
                    "type": "message",
                    "id": f"m{i}",
                    "parentId": f"m{i - 1}" if i else None,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"role": "user", "content": "x"},
                }
            )
            for i in range(5)
        ]
        lines.insert(4, "{not json")
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(TranscriptError, match=r"bad.jsonl:5"):
            store.import_jsonl(path, strict=True)
        assert store.conn.execute("select count(*) from turns").fetchone()[0] == 0
        assert store.conn.execute("select count(*) from sessions").fetchone()[0] == 0
        # the default repairs and reports instead
        report = store.import_paths([path])
        assert report.turns == 5 and report.skipped == 1
        assert report.problems[0]["line"] == 5 and report.problems[0]["kind"] == "bad_json"

    def test_a_failing_entry_rolls_back_the_whole_file(
        self, tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "s.jsonl"
        entries = [
            {
                "type": "message",
                "id": f"m{i}",
                "parentId": f"m{i - 1}" if i else None,
                "message": {"role": "user", "content": "x"},
            }
            for i in range(50)
        ]
        _write(path, HEADER, entries)
        original = appends.turn_values
        calls = {"n": 0}

        def failing(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 30:
                raise KeyboardInterrupt  # Ctrl-C mid-file
            return original(*args, **kwargs)

        monkeypatch.setattr(appends, "turn_values", failing)
        with pytest.raises(KeyboardInterrupt):
            store.import_paths([path])
        assert store.conn.execute("select count(*) from turns").fetchone()[0] == 0
        monkeypatch.setattr(appends, "turn_values", original)
        assert store.import_paths([path]).turns == 50


def test_stdin_and_directories(tmp_path: Path, store: Store) -> None:
    folder = tmp_path / "sessions" / "project"
    folder.mkdir(parents=True)
    entries = [
        {
            "type": "message",
            "id": "a",
            "parentId": None,
            "message": {"role": "user", "content": "hi"},
        }
    ]
    _write(folder / "one.jsonl", {**HEADER, "id": "one"}, entries)
    _write(folder / "two.jsonl", {**HEADER, "id": "two"}, entries)
    report = store.import_paths([tmp_path / "sessions"])
    assert sorted(report.sessions) == ["one", "two"]
    data = (folder / "one.jsonl").read_bytes().replace(b'"one"', b'"three"')
    report = store.import_paths(["-"], stdin=io.BytesIO(data))
    assert report.sessions == ["three"]


def test_export_leaf_path_and_ndjson(store: Store) -> None:
    s = store.create_session(cwd="/x")
    a = store.append_message(s.id, {"role": "user", "content": "q", "timestamp": 1})
    store.append_message(
        s.id, {"role": "assistant", "content": [{"type": "text", "text": "a1"}], "timestamp": 2}
    )
    b = store.append_message(
        s.id,
        {"role": "assistant", "content": [{"type": "text", "text": "a2"}], "timestamp": 3},
        parent_id=a.id,
    )
    out = io.StringIO()
    store.export_jsonl(s.id, out, leaf_id=b.id)
    lines = [json.loads(x) for x in out.getvalue().split("\n") if x]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    assert [x["id"] for x in lines[1:]] == [a.id, b.id]
    nd = io.StringIO()
    store.export_jsonl(s.id, nd, format="ndjson")
    assert all(json.loads(x)["type"] in ("message",) for x in nd.getvalue().splitlines()[1:] if x)


@pytest.mark.slow
def test_import_memory_stays_flat(tmp_path: Path) -> None:
    """Peak Python memory while importing is bounded: it does not follow the file size."""
    import tracemalloc

    def write(path: Path, n: int) -> int:
        with path.open("w") as f:
            f.write(json.dumps(HEADER) + "\n")
            prev = None
            for i in range(n):
                e = {
                    "type": "message",
                    "id": f"{i:08x}",
                    "parentId": prev,
                    "message": {
                        "role": "toolResult",
                        "toolCallId": "c",
                        "toolName": "read",
                        "content": [{"type": "text", "text": "z" * 1000}],
                        "isError": False,
                    },
                }
                f.write(json.dumps(e) + "\n")
                prev = e["id"]
        return path.stat().st_size

    peaks, sizes = [], []
    for n in (12_000, 48_000):
        path = tmp_path / f"m{n}.jsonl"
        sizes.append(write(path, n))
        with Store(tmp_path / f"m{n}.db", counter="chars4") as store:
            tracemalloc.start()
            report = store.import_paths([path])
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert report.turns == n
    # four times the file (12 -> 48 MB of JSON): the peak stays put, far below the file
    assert peaks[1] < 1.3 * peaks[0] + 2_000_000, peaks
    assert peaks[1] < sizes[1] / 4, (peaks, sizes)


class TestLongFiles:
    """Past the parent cache (10,000 turns) ids are settled by a filter and the database."""

    def _chain(self, n: int) -> list[dict[str, Any]]:
        return [
            {
                "type": "message",
                "id": f"e{i}",
                "parentId": f"e{i - 1}" if i else None,
                "message": {"role": "user", "content": f"turn {i}", "timestamp": i},
            }
            for i in range(n)
        ]

    @pytest.mark.parametrize("filter_says", ["real", "always maybe"])
    def test_a_duplicate_far_back_is_found(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filter_says: str
    ) -> None:
        from nexus_store.store import ingest

        monkeypatch.setattr(ingest, "_CACHE", 5)  # forget all but the last 5 turns
        if filter_says == "always maybe":  # every id goes to the database
            monkeypatch.setattr(ingest._SeenIds, "__contains__", lambda self, uid: True)
        entries = self._chain(1_200)
        dup = {**entries[3], "parentId": "e1199", "message": {"role": "user", "content": "other"}}
        path = tmp_path / "long.jsonl"
        _write(path, HEADER, [*entries, dup])
        with Store(tmp_path / "l.db", counter="chars4") as store:
            report = store.import_paths([path])
            assert report.turns == 1_200
            (problem,) = report.problems
            assert problem["kind"] == "duplicate_id" and problem["line"] == 1_202
            assert store.get_turn(report.sessions[0], "e3").entry == entries[3]  # first kept
            grown = [*entries, *self._chain(1_300)[1_200:]]
            _write(path, HEADER, grown)
            again = store.import_paths([path])
            assert again.turns == 100 and again.conflicts == 0 and not again.problems
            changed = {**grown[700], "message": {"role": "user", "content": "x"}}
            _write(path, HEADER, [*grown[:700], changed, *grown[701:]])
            third = store.import_paths([path])
            assert third.conflicts == 1 and third.turns == 0
            assert store.get_turn(report.sessions[0], "e700").entry == grown[700]

    def test_the_filter_never_forgets_an_id(self) -> None:
        from nexus_store.store.ingest import _SeenIds

        seen = _SeenIds()
        ids = [f"id-{i}" for i in range(50_000)]
        for uid in ids:
            seen.add(uid)
        assert all(uid in seen for uid in ids)
        misses = sum(1 for i in range(50_000) if f"other-{i}" in seen)
        assert misses < 50  # about 1 in 30,000 at this size
