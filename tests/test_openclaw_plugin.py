"""The OpenClaw plugin's JavaScript, run by Node against a real ``nexus-store serve``.

No OpenClaw here (tests/test_openclaw_e2e.py runs the real one): a Node script imports
the plugin's ``index.js`` and calls the engine the way OpenClaw does. Node comes from
``NEXUS_TEST_NODE`` or ``node`` on PATH (any Node >= 18; the plugin uses only node:http).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nexus_store.integrations import openclaw_plugin_dir

pytest.importorskip("uvicorn")


def _node() -> str | None:
    node = os.environ.get("NEXUS_TEST_NODE") or shutil.which("node")
    if not node:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    match = re.match(r"v(\d+)", out)
    return node if match and int(match[1]) >= 18 else None


NODE = _node()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="Node >= 18 not found (set NEXUS_TEST_NODE)"),
]
SERVE = [sys.executable, "-m", "nexus_store"]


def run_js(tmp_path: Path, body: str, **values: Any) -> list[Any]:
    """Run ``body`` (an async function body using `engine`, `client`, `out`) under Node."""
    assert NODE is not None
    index = (openclaw_plugin_dir() / "index.js").as_uri()
    consts = "\n".join(f"const {k} = {json.dumps(v)};" for k, v in values.items())
    script = tmp_path / "drive.mjs"
    script.write_text(
        f"import {{ ServiceClient, createEngine }} from {json.dumps(index)};\n{consts}\n"
        "const lines = [];\nconst out = (v) => lines.push(v);\n"
        "const client = new ServiceClient({ db, command, startTimeoutMs: 60000 });\n"
        "const engine = createEngine(client, { keepRecentTokens: 0 }, { workspaceDir: undefined });\n"
        f"try {{\n{body}\n}} finally {{ console.log(JSON.stringify(lines)); }}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEXUS_STORE_")}
    done = subprocess.run([NODE, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def stop_service(db: Path) -> None:
    state = Path(f"{db}.service.json")
    if state.exists():
        os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)


def count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


MESSAGES = [
    {"role": "user", "content": "hello", "timestamp": 1},
    {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "timestamp": 2},
]


def test_every_engine_method_through_a_service_it_starts(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    body = """
    out(engine.info);
    out(await engine.bootstrap({ sessionId: "sid", sessionKey: "agent:main:main", sessionFile: "x" }));
    out(await engine.ingest({ sessionId: "sid", sessionKey: "agent:main:main", message: messages[0] }));
    out(await engine.ingestBatch({ sessionId: "sid", sessionKey: "agent:main:main", messages }));
    out(await engine.commitTurn({ advancementKey: "k1", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    out(await engine.commitTurn({ advancementKey: "k1", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    const assembled = await engine.assemble({ sessionId: "sid", sessionKey: "agent:main:main", messages, tokenBudget: 1000 });
    out(assembled.messages.map((m) => m.role));
    out(await engine.afterTurn({ sessionId: "sid", sessionKey: "agent:main:main", sessionFile: "x", messages, prePromptMessageCount: 0 }) ?? null);
    out(await engine.maintain({ sessionId: "sid", sessionKey: "agent:main:main", sessionFile: "x", runtimeContext: { tokenBudget: 128000 } }));
    const fork = await engine.prepareSubagentSpawn({ parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:f", contextMode: "fork" });
    const forked = await engine.assemble({ sessionId: "child", sessionKey: "agent:main:subagent:f", messages: [] });
    out(forked.messages.map((m) => m.role));
    await engine.onSubagentEnded({ childSessionKey: "agent:main:subagent:f", reason: "completed" });
    const iso = await engine.prepareSubagentSpawn({ parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:i", contextMode: "isolated" });
    await iso.rollback();
    out(await engine.compact({ sessionId: "sid", sessionKey: "agent:main:main", force: true }));
    await engine.dispose();
    """
    try:
        lines = run_js(tmp_path, body, db=str(db), command=SERVE, messages=MESSAGES)
    finally:
        stop_service(db)
    info, boot, ingest, batch, first, again, roles, after, maintained, forked, compacted = lines
    assert info["ownsCompaction"] is True
    assert info["transcriptSemantics"] == {
        "currentTurnFence": "before-current-turn-entry-v1",
        "turnAdvancementIdempotency": "atomic-idempotent-v1",
    }
    assert boot["bootstrapped"] is True
    assert ingest == {"ingested": False} and batch == {"ingestedCount": 0}
    assert (first, again) == ({"status": "committed"}, {"status": "duplicate"})
    assert roles == ["user", "assistant"]
    assert after is None and maintained["changed"] is False
    assert forked == ["user", "assistant"]  # the parent's path, read by reference
    assert compacted["ok"] is False and "nothing to compact" in compacted["reason"]
    assert count(db, "select count(*) from turns where kind = 'message'") == 1
    assert count(db, "select count(*) from engine_sessions where ended_reason = 'completed'") == 1
    assert count(db, "select count(*) from engine_sessions where session_key like '%:i'") == 0


def test_service_that_cannot_start_fails_one_clear_call_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    body = """
    try {
      await engine.commitTurn({ advancementKey: "k1", sessionId: "sid", sessionKey: "agent:main:main", messages });
      out("no error");
    } catch (err) {
      out(err.message);
    }
    """
    (message,) = run_js(
        tmp_path,
        body,
        db=str(db),
        command=[str(tmp_path / "missing-nexus-store")],
        messages=MESSAGES,
    )
    assert message.startswith("nexus_store commitTurn failed: cannot run")
    assert "OpenClaw's outbox" in message and str(db) in message
    # OpenClaw retries the same advancement key from its outbox: committed once
    retry = """
    out(await engine.commitTurn({ advancementKey: "k1", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    out(await engine.commitTurn({ advancementKey: "k1", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    """
    try:
        lines = run_js(tmp_path, retry, db=str(db), command=SERVE, messages=MESSAGES)
    finally:
        stop_service(db)
    assert lines == [{"status": "committed"}, {"status": "duplicate"}]
    assert count(db, "select count(*) from turns") == 1


def test_service_error_reaches_openclaw_as_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    body = """
    try {
      await engine.commitTurn({ sessionId: "sid", sessionKey: "agent:main:main", messages });
    } catch (err) {
      out(err.message);
    }
    """
    try:
        (message,) = run_js(tmp_path, body, db=str(db), command=SERVE, messages=MESSAGES)
    finally:
        stop_service(db)
    assert "advancementKey" in message and "HTTP 400" in message and "\n" not in message
    assert "service log" in message


def test_one_connection_serves_many_calls_and_a_restarted_service_is_found(
    tmp_path: Path,
) -> None:
    """The client keeps its connection and the service's address: a service killed and
    started again (a new address and pid) is found on the next call, nothing lost."""
    db = tmp_path / "s.db"
    body = """
    const sockets = new Set();
    const original = client.agent.createConnection.bind(client.agent);
    client.agent.createConnection = (...args) => { const s = original(...args); sockets.add(s); return s; };
    for (let i = 0; i < 20; i++) {
      await engine.commitTurn({ advancementKey: `k${i}`, sessionId: "sid", sessionKey: "agent:main:main", messages });
    }
    out(sockets.size);
    out(JSON.parse(readFileSync(`${db}.service.json`, "utf8")).pid);
    process.kill(JSON.parse(readFileSync(`${db}.service.json`, "utf8")).pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 300));
    out(await engine.commitTurn({ advancementKey: "k19", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    out(await engine.commitTurn({ advancementKey: "k20", sessionId: "sid", sessionKey: "agent:main:main", messages }));
    out(JSON.parse(readFileSync(`${db}.service.json`, "utf8")).pid);
    """
    body = 'const { readFileSync } = await import("node:fs");\n' + body
    try:
        opened, first_pid, retried, new, second_pid = run_js(
            tmp_path, body, db=str(db), command=SERVE, messages=MESSAGES
        )
    finally:
        stop_service(db)
    assert opened == 1  # twenty calls, one connection
    assert retried == {"status": "duplicate"} and new == {"status": "committed"}
    assert second_pid != first_pid
    assert count(db, "select count(*) from turn_commits") == 21


def test_a_service_that_exits_at_start_fails_the_call_at_once(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    body = """
    const t0 = Date.now();
    try {
      await engine.assemble({ sessionId: "sid", sessionKey: "agent:main:main", messages });
    } catch (err) {
      out(err.message);
    }
    out(Date.now() - t0);
    """
    command = [sys.executable, "-c", "raise SystemExit(3)"]
    message, ms = run_js(tmp_path, body, db=str(db), command=command, messages=MESSAGES)
    assert "the service exited (3) before answering" in message, message
    assert ms < 30_000  # not the 60 s start timeout


def test_the_plugin_names_openclaws_own_store(tmp_path: Path) -> None:
    body = """
    const { hostStore } = await import(indexUrl);
    out(hostStore({ agentDir: "/s/agents/main/agent" }, {}));
    out(hostStore({}, { admission: { storePath: "/x/agents/ops/agent/openclaw-agent.sqlite" } }));
    out(hostStore({}, { sessionTarget: { storePath: "/x/agents/ops/sessions/sessions.json" }, sessionKey: "agent:ops:main" }));
    """
    index = (openclaw_plugin_dir() / "index.js").as_uri()
    env_state = tmp_path / "state"
    os.environ["OPENCLAW_STATE_DIR"] = str(env_state)
    try:
        lines = run_js(tmp_path, body, db=str(tmp_path / "s.db"), command=SERVE, indexUrl=index)
    finally:
        del os.environ["OPENCLAW_STATE_DIR"]
    assert lines == [
        "/s/agents/main/agent/openclaw-agent.sqlite",
        "/x/agents/ops/agent/openclaw-agent.sqlite",
        str(env_state / "agents" / "ops" / "agent" / "openclaw-agent.sqlite"),
    ]
