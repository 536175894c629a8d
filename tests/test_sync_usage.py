"""Claude Code usage counts once across the store: a resumed session copies earlier
history (same message ids and request ids) into a new file; both sessions keep every
entry and their whole context, and each API response's usage is counted by one turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from nexus_store.sync import sync_paths


def _user(session: str, uuid: str, parent: str | None, text: str) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": text},
    }


def _assistant(
    session: str, uuid: str, parent: str, msg: str, request: str, text: str, tokens: int
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": session,
        "requestId": request,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {
            "id": msg,
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": tokens, "output_tokens": 1},
        },
    }


def _original(session: str = "first") -> list[dict[str, Any]]:
    return [
        _user(session, "u1", None, "hello"),
        _assistant(session, "a1", "u1", "msg_1", "req_1", "thinking about it", 100),
        _assistant(session, "a1b", "a1", "msg_1", "req_1", "and the rest", 100),  # split
        _user(session, "u2", "a1b", "more"),
        _assistant(session, "a2", "u2", "msg_2", "req_2", "more it is", 20),
    ]


def _resumed() -> list[dict[str, Any]]:
    # Claude Code's --resume: the earlier history copied under the new session id.
    copied = [{**line, "sessionId": "second"} for line in _original()]
    return [
        *copied,
        _user("second", "u3", "a2", "and now?"),
        _assistant("second", "a3", "u3", "msg_3", "req_3", "now this", 3),
    ]


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _usage(store: Store) -> int:
    row = store.conn.execute("select coalesce(sum(input_tokens), 0) from messages").fetchone()
    return int(row[0])


def _texts(store: Store, session: str) -> list[Any]:
    return [m.get("content") for m in store.context(session).messages]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "p" / "first.jsonl", tmp_path / "p" / "second.jsonl"
    first.parent.mkdir()
    _write(first, _original())
    _write(second, _resumed())
    return first, second


@pytest.mark.parametrize("order", ["original first", "resumed first"])
def test_copied_history_counts_usage_once_and_keeps_both_contexts(
    files: tuple[Path, Path], order: str
) -> None:
    first, second = files
    paths = [first, second] if order == "original first" else [second, first]
    with Store(memory=True, counter="chars4") as store:
        for path in paths:
            report = store.import_paths([path])
            assert report.errors == [] and report.conflicts == 0
        assert _usage(store) == 100 + 20 + 3  # msg_1, msg_2 and msg_3 once each
        # Both sessions keep every entry and their whole context.
        assert len(_texts(store, "first")) == 5
        assert _texts(store, "second")[:5] == _texts(store, "first")
        assert len(_texts(store, "second")) == 7
        # Nothing is lost: every line's own usage stays on its entry (ccMessage).
        for path, session in ((first, "first"), (second, "second")):
            kept = {
                e["id"]: e["ccMessage"].get("usage")
                for e in store.iter_export_entries(session)
                if "ccMessage" in e
            }
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            assert kept == {x["uuid"]: x["message"].get("usage") for x in lines}
        # Importing both again changes nothing (the counting turn is the same).
        again = store.import_paths([first, second])
        assert (again.turns, again.conflicts) == (0, 0)
        assert _usage(store) == 123


def test_sync_counts_copied_history_once_even_in_pieces(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = files
    data = second.read_bytes()
    second.write_bytes(data[: len(data) // 2])  # the resumed file is still being written
    with Store(tmp_path / "s.db", counter="chars4") as store:
        report = sync_paths(store, [first.parent])
        assert report.errors == [] and report.new == 2
        second.write_bytes(data)
        report = sync_paths(store, [first.parent])
        assert report.grown == 1 and report.conflicts == 0
        assert _usage(store) == 123
        assert len(_texts(store, "second")) == 7
        counted = store.conn.execute(
            "select r.response_key, s.source_id from response_usage r "
            "join turns t on t.id = r.turn_id join sessions s on s.id = t.session_id "
            "order by r.response_key"
        ).fetchall()
        assert [tuple(row) for row in counted] == [
            ("msg_1:req_1", "first"),
            ("msg_2:req_2", "first"),
            ("msg_3:req_3", "second"),
        ]


def test_usage_is_counted_again_when_the_counting_session_is_gone(
    files: tuple[Path, Path],
) -> None:
    first, second = files
    with Store(memory=True, counter="chars4") as store:
        store.import_paths([first])
        store.conn.execute(
            "delete from response_usage where turn_id in "
            "(select t.id from turns t join sessions s on s.id = t.session_id "
            "where s.source_id = 'first')"
        )
        store.import_paths([second])  # nothing says msg_1/msg_2 are counted: second counts them
        assert _usage(store) == 123 + 120
