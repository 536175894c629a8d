"""OpenClaw ``leaf`` and ``reset`` entries: the context of an imported session equals the one
OpenClaw itself assembles.

A ``leaf`` entry is a navigation control (the active leaf is now ``targetId``; what is
appended under it continues from the target); a ``reset`` starts a new context window
(nothing before it, or, with ``firstKeptEntryId``, the user/assistant messages and paired
tool results from there). Sessions with these entries are written into OpenClaw stores
built from the CREATE statements of real releases (tests/openclaw_db.py), imported, and
compared with OpenClaw's own ``buildSessionContext`` run by Node on the same rows. That
comparison needs ``NEXUS_TEST_NODE`` and ``NEXUS_TEST_OPENCLAW`` (as test_openclaw_real.py;
skipped otherwise); the expected message texts, which are OpenClaw's, are asserted always.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nexus_store import Store
from tests import openclaw_db

_TS = "2026-09-01T10:00:00.000Z"


def _user(uid: str, parent: str | None, text: str) -> dict[str, Any]:
    message = {"role": "user", "content": text, "timestamp": 1_788_000_000_000}
    return {"type": "message", "id": uid, "parentId": parent, "timestamp": _TS, "message": message}


def _assistant(uid: str, parent: str | None, text: str, calls: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "toolCall", "id": c, "name": "read", "arguments": {}} for c in calls]
    message = {
        "role": "assistant",
        "content": content,
        "provider": "openai",
        "model": "m1",
        "api": "openai-completions",
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": 1_788_000_000_000,
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
    }
    return {"type": "message", "id": uid, "parentId": parent, "timestamp": _TS, "message": message}


def _result(uid: str, parent: str, call: str, text: str) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 1_788_000_000_000,
    }
    return {"type": "message", "id": uid, "parentId": parent, "timestamp": _TS, "message": message}


def _leaf(uid: str, parent: str, target: str | None) -> dict[str, Any]:
    return {"type": "leaf", "id": uid, "parentId": parent, "timestamp": _TS, "targetId": target}


def _reset(uid: str, parent: str, kept: str | None = None) -> dict[str, Any]:
    entry = {"type": "reset", "id": uid, "parentId": parent, "timestamp": _TS, "reason": "reset"}
    return entry if kept is None else {**entry, "firstKeptEntryId": kept}


def _chat() -> list[dict[str, Any]]:
    return [
        _user("u1", None, "one"),
        _assistant("a1", "u1", "ONE"),
        _user("u2", "a1", "two"),
        _assistant("a2", "u2", "TWO"),
    ]


#: name -> (entries, the texts of the context OpenClaw assembles)
CASES: dict[str, tuple[list[dict[str, Any]], list[str]]] = {
    "leaf control, then a branch appended under it": (
        [
            *_chat(),
            _leaf("L1", "a2", "a1"),
            _user("u3", "L1", "three"),
            _assistant("a3", "u3", "3"),
        ],
        ["one", "ONE", "three", "3"],
    ),
    "leaf control as the last entry": (
        [*_chat(), _leaf("L1", "a2", "a1")],
        ["one", "ONE"],
    ),
    "leaf control before the first entry": (
        [*_chat(), _leaf("L1", "a2", None), _user("u3", "L1", "fresh")],
        ["fresh"],
    ),
    "reset that clears": (
        [*_chat(), _reset("R1", "a2"), _user("u3", "R1", "after"), _assistant("a3", "u3", "A")],
        ["after", "A"],
    ),
    "reset that keeps the tail, tool results paired": (
        [
            _user("u1", None, "one"),
            _assistant("a1", "u1", "calling", ["c1"]),
            _result("t1", "a1", "c1", "read it"),
            _result("t2", "t1", "c9", "orphan result"),
            {
                "type": "custom_message",
                "id": "cm",
                "parentId": "t2",
                "timestamp": _TS,
                "customType": "note",
                "content": "custom",
                "display": True,
            },
            _assistant("a2", "cm", "done"),
            _reset("R1", "a2", kept="a1"),
            _user("u3", "R1", "after"),
        ],
        ["calling", "read it", "done", "after"],
    ),
    "compaction, then a reset: the reset wins": (
        [
            *_chat(),
            {
                "type": "compaction",
                "id": "C1",
                "parentId": "a2",
                "timestamp": _TS,
                "summary": "so far",
                "firstKeptEntryId": "u2",
                "tokensBefore": 100,
            },
            _user("u3", "C1", "three"),
            _reset("R1", "u3"),
            _user("u4", "R1", "four"),
        ],
        ["four"],
    ),
    "reset, then a compaction: the compaction wins": (
        [
            *_chat(),
            _reset("R1", "a2"),
            _user("u3", "R1", "three"),
            _assistant("a3", "u3", "THREE"),
            {
                "type": "compaction",
                "id": "C1",
                "parentId": "a3",
                "timestamp": _TS,
                "summary": "so far",
                "firstKeptEntryId": "a3",
                "tokensBefore": 100,
            },
            _user("u4", "C1", "four"),
        ],
        ["so far", "THREE", "four"],
    ),
}


def _texts(messages: list[Any]) -> list[str]:
    out = []
    for message in messages:
        if message.get("role") == "compactionSummary":
            out.append(message["summary"])
            continue
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b["text"] for b in content if b.get("type") == "text")
    return out


def _store(tmp_path: Path, version: int, entries: list[dict[str, Any]]) -> Path:
    path = tmp_path / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    conn = openclaw_db.create(path, version)
    openclaw_db.add_window(conn, "s1", created_at=1)
    openclaw_db.add_events(conn, "s1", [openclaw_db.header("s1"), *entries], compress=version >= 23)
    conn.close()
    return path


_NODE_SCRIPT = """
const [module, name] = process.argv.slice(1);
const build = (await import(module))[name];
let input = "";
for await (const chunk of process.stdin) input += chunk;
const context = build(JSON.parse(input));
process.stdout.write(JSON.stringify(context));
"""


def _openclaw_context(entries: list[dict[str, Any]]) -> dict[str, Any]:
    node, package = os.environ.get("NEXUS_TEST_NODE"), os.environ.get("NEXUS_TEST_OPENCLAW")
    if not node or not package:
        pytest.skip("NEXUS_TEST_NODE and NEXUS_TEST_OPENCLAW are not set (.ci/run sets them)")
    dist = Path(package)
    dist = (dist if dist.is_dir() else dist.parent) / "dist"
    for candidate in sorted(dist.glob("session-manager-codec-*.mjs")):
        text = candidate.read_text()
        if "function buildSessionContext(entries, leafId, byIdInput)" in text:
            found = re.search(r"buildSessionContext as (\w+)", text)
            if found:
                break
    else:
        pytest.skip(f"no buildSessionContext(entries, leafId, byId) in {dist} (another release)")
    run = subprocess.run(
        [node, "--input-type=module", "-e", _NODE_SCRIPT, candidate.as_uri(), found[1]],
        input=json.dumps(entries),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("version", openclaw_db.VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_imported_context_holds_what_openclaw_keeps(
    tmp_path: Path, case: str, version: int
) -> None:
    entries, texts = CASES[case]
    with Store(memory=True, counter="chars4") as store:
        report = store.import_paths([_store(tmp_path, version, entries)])
        assert report.errors == [] and report.problems == []
        assert _texts(store.context("s1").messages) == texts
        # Export gives the rows back as written (a leaf control's parentId included).
        assert list(store.iter_export_entries("s1")) == entries


@pytest.mark.parametrize("case", sorted(CASES))
def test_context_equals_what_openclaw_itself_assembles(tmp_path: Path, case: str) -> None:
    entries, texts = CASES[case]
    expected = _openclaw_context(entries)  # skips without Node and OpenClaw
    assert _texts(expected["messages"]) == texts  # the texts the other test expects
    with Store(memory=True, counter="chars4") as store:
        store.import_paths([_store(tmp_path, 23, entries)])
        context = store.context("s1")
    assert context.messages == expected["messages"]
    assert context.model == expected["model"]
    assert context.thinking_level == expected["thinkingLevel"]
