"""Every corpus transcript parses, and what the parser reports matches a count made
independently from the file itself (../shared/corpus, read in place, never copied)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nexus_store.formats import apply_patch, detect_format, parse_file, write_pi


def corpus_dir() -> Path:
    here = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
    return here if here.is_dir() else Path("/work/shared/corpus")


CORPUS = corpus_dir()
FILES = sorted(CORPUS.glob("*/*.jsonl")) if CORPUS.is_dir() else []
needs_corpus = pytest.mark.skipif(not FILES, reason="../shared/corpus is absent (a user's clone)")
EXPECTED_FORMAT = {
    "pi": "pi",
    "pi-synthetic": "pi",
    "claude-code": "claude_code",
    "claude-code-synthetic": "claude_code",
    "codex": "codex",
}


def independent_count(path: Path) -> dict[str, Any]:
    """Count objects, glued lines and bad lines without the parser's reader.

    Glued objects are found by turning ``}{`` into ``},{`` inside a JSON array,
    a different method from the parser's raw_decode loop.
    """
    objects: list[tuple[int, Any]] = []
    counts: Counter[str] = Counter()
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        if not raw.strip():
            continue
        text = raw.decode("utf-8")
        try:
            values = [json.loads(text)]
        except ValueError:
            try:
                values = json.loads("[" + text.replace("}{", "},{") + "]")
            except ValueError:
                counts["skipped_lines"] += 1
                continue
            counts["glued"] += 1
        for value in values:
            if isinstance(value, dict):
                objects.append((number, value))
            else:
                counts["not_object"] += 1
    return {"objects": objects, "counts": counts}


def entries_expected(folder: str, objects: list[tuple[int, Any]]) -> int:
    if folder.startswith("pi") and objects and objects[0][1].get("type") == "session":
        return len(objects) - 1  # the header line is not an entry
    if folder == "codex":
        metas = [o for _, o in objects if o.get("type") == "session_meta"]
        return len(objects) - (1 if metas and isinstance(metas[0].get("payload"), dict) else 0)
    return len(objects)


def semantic_problems(folder: str, objects: list[tuple[int, Any]]) -> Counter[str]:
    """Problems about values, counted from the file: missing types, bad messages, v1 indexes."""
    counts: Counter[str] = Counter()
    header = objects[0][1] if objects else {}
    v1 = folder.startswith("pi") and header.get("type") == "session" and "version" not in header
    for ordinal, (_, obj) in enumerate(objects):
        if folder.startswith("pi") and ordinal == 0 and obj.get("type") == "session":
            continue
        if not isinstance(obj.get("type"), str):
            counts["missing_field"] += 1
        if folder.startswith("claude") and obj.get("type") in ("user", "assistant"):
            if "message" in obj and not isinstance(obj["message"], dict):
                counts["bad_type"] += 1
        if v1 and obj.get("type") == "compaction" and "firstKeptEntryIndex" in obj:
            if not 0 < obj["firstKeptEntryIndex"] < ordinal:
                counts["bad_reference"] += 1
    return counts


def consume(path: Path) -> tuple[Any, list[Any]]:
    sessions = list(parse_file(path))
    assert len(sessions) == 1
    session = sessions[0]
    entries = list(session.entries)
    return session, entries


@needs_corpus
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
class TestCorpusFile:
    def test_format_is_detected_from_content(self, path: Path) -> None:
        head = path.read_bytes().split(b"\n")[:20]
        assert detect_format(head) == EXPECTED_FORMAT[path.parent.name]

    def test_entry_and_problem_counts_match_the_file(self, path: Path) -> None:
        folder = path.parent.name
        counted = independent_count(path)
        session, entries = consume(path)
        assert len(entries) == entries_expected(folder, counted["objects"])
        kinds = Counter(p.kind for p in session.problems)
        skipped = kinds["bad_json"] + kinds["truncated"]
        assert skipped == counted["counts"]["skipped_lines"]
        assert kinds["glued"] == counted["counts"]["glued"]
        assert kinds["not_object"] == counted["counts"]["not_object"]
        expected = semantic_problems(folder, counted["objects"])
        for kind in ("missing_field", "bad_type", "bad_reference"):
            assert kinds[kind] == expected[kind], kind
        assert sum(kinds.values()) == (
            skipped + kinds["glued"] + kinds["not_object"] + sum(expected.values())
        )
        assert all(p.line >= 1 and str(path) == p.path for p in session.problems)

    def test_entries_are_well_formed_and_in_file_order(self, path: Path) -> None:
        _, entries = consume(path)
        lines = [e.line for e in entries]
        assert lines == sorted(lines)
        for parsed in entries:
            entry = parsed.entry
            assert isinstance(entry["type"], str) and entry["type"]
            assert isinstance(entry["id"], str)
            assert entry["parentId"] is None or isinstance(entry["parentId"], str)
            if entry["type"] == "message":
                assert ("message" in entry) != ("messages" in entry)
                messages = entry.get("messages") or [entry["message"]]
                assert all(isinstance(m, dict) and "role" in m for m in messages)

    def test_parsing_twice_gives_the_same_ids(self, path: Path) -> None:
        first = [e.entry["id"] for e in consume(path)[1]]
        second = [e.entry["id"] for e in consume(path)[1]]
        assert first == second


def pi_v3_files() -> list[Path]:
    found = []
    for path in FILES:
        if path.parent.name.startswith("pi"):
            first = json.loads(path.read_bytes().split(b"\n", 1)[0])
            if first.get("version") == 3:
                found.append(path)
    return found


@needs_corpus
@pytest.mark.parametrize("path", pi_v3_files(), ids=lambda p: p.name)
def test_pi_v3_round_trips_line_for_line(path: Path, tmp_path: Path) -> None:
    session, entries = consume(path)
    out = tmp_path / "out.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        write_pi(session.header, (apply_patch(e.entry, e.patch) for e in entries), handle)
    source = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            value = json.loads(raw)
        except ValueError:
            continue  # a skipped line is reported, not exported
        source.append(value)
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n")[:-1]]
    assert written == source
    assert all(
        line == json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        for line, v in zip(out.read_text(encoding="utf-8").split("\n")[:-1], written, strict=True)
    )
