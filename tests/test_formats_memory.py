"""Streaming: parsing a large transcript keeps memory flat (tracemalloc peak)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus_store.formats import parse_file

LINE_TEXT = "lorem ipsum dolor sit amet " * 70  # ~1.9 KB per line


def pi_line(n: int) -> dict[str, object]:
    parent = f"e{n - 1}" if n else None
    message = {
        "role": "user" if n % 2 else "assistant",
        "content": [{"type": "text", "text": LINE_TEXT}],
    }
    return {
        "type": "message",
        "id": f"e{n}",
        "parentId": parent,
        "timestamp": "t",
        "message": message,
    }


def cc_line(n: int) -> dict[str, object]:
    return {
        "type": "assistant",
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n else None,
        "sessionId": "big",
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {
            "id": f"m{n // 3}",
            "role": "assistant",
            "usage": {"input_tokens": 1},
            "content": [{"type": "text", "text": LINE_TEXT}],
        },
    }


def ndjson_line(n: int) -> dict[str, object]:
    if n % 1000 == 999:
        return {
            "id": f"c{n}",
            "type": "compaction",
            "summary": "s",
            "boundaryMessageId": f"m{n - 500}",
            "timestamp": 1707820000 + n,
        }
    return {
        "id": f"m{n}",
        "type": "message",
        "role": "user",
        "content": LINE_TEXT,
        "timestamp": 1707820000 + n,
    }


def write_file(
    path: Path,
    header: dict[str, object] | None,
    make: Callable[[int], dict[str, object]],
    size: int,
) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        if header is not None:
            out.write(json.dumps(header) + "\n")
        while out.tell() < size:
            out.write(json.dumps(make(count), separators=(",", ":")) + "\n")
            count += 1
    return count


def peak_while_parsing(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    try:
        count = 0
        for session in parse_file(path):
            for _ in session.entries:
                count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.parametrize(
    ("name", "header", "make", "size"),
    [
        (
            "pi.jsonl",
            {"type": "session", "version": 3, "id": "big", "timestamp": "t", "cwd": "/"},
            pi_line,
            50_000_000,
        ),
        ("cc.jsonl", None, cc_line, 10_000_000),
        ("events.ndjson", None, ndjson_line, 10_000_000),
    ],
)
def test_parsing_a_large_file_keeps_memory_flat(
    tmp_path: Path,
    name: str,
    header: dict[str, object] | None,
    make: Callable[[int], dict[str, object]],
    size: int,
) -> None:
    path = tmp_path / name
    written = write_file(path, header, make, size)
    count, peak = peak_while_parsing(path)
    assert count == written
    # A few lines in flight plus bounded caches; the file itself is 10-50 MB.
    assert peak < 1_000_000, f"peak {peak / 1e6:.1f} MB while parsing {size / 1e6:.0f} MB"


@pytest.mark.slow
def test_peak_does_not_grow_with_file_size(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "big", "timestamp": "t", "cwd": "/"}
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_file(small, header, pi_line, 5_000_000)
    write_file(large, header, pi_line, 200_000_000)
    _, small_peak = peak_while_parsing(small)
    _, large_peak = peak_while_parsing(large)
    assert large_peak < small_peak * 1.5 + 500_000
