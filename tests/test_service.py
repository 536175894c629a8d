"""The context-engine service: lifecycle calls, idempotent commits, token, loopback, files.

Runs without Node: the app through Starlette's test client, and the real
`nexus-store serve` process where starting, locking, SIGTERM and kill -9 matter.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient

from nexus_store import Store
from nexus_store.service.app import create_app, openapi
from nexus_store.service.client import ServiceClient, ServiceError
from nexus_store.service.lifecycle import EngineCalls
from nexus_store.service.runner import (
    ServiceFiles,
    ServiceUnavailable,
    ensure_running,
    read_token,
    running,
    state_dir,
)
from nexus_store.store.engine_sessions import EngineSessions
from nexus_store.store.pg import redact

TOKEN = "test-token"
LOCAL = ("127.0.0.1", 50000)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 2}


@pytest.fixture
def calls(tmp_path: Path) -> Any:
    store = Store(tmp_path / "s.db", counter="chars4")
    yield EngineCalls(store)
    store.close()


@pytest.fixture
def client(calls: EngineCalls) -> TestClient:
    app = create_app(calls, TOKEN, database="s.db")
    return TestClient(app, client=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})


def commit(client: TestClient, key: str, *texts: str, session: str = "agent:main:k") -> Any:
    messages = [user(texts[0]), *(assistant(t) for t in texts[1:])]
    response = client.post(
        "/v1/commitTurn",
        json={
            "advancementKey": key,
            "sessionKey": session,
            "sessionId": "sid-1",
            "messages": messages,
        },
    )
    assert response.status_code == 200, response.text
    return response.json()


class TestCommitTurn:
    def test_second_commit_with_same_key_is_duplicate_and_writes_nothing(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        assert commit(client, "adv-1", "q1", "a1")["status"] == "committed"
        before = calls.store.conn.execute("select count(*) from turns").fetchone()[0]
        again = commit(client, "adv-1", "q1", "a1")
        assert again["status"] == "duplicate"
        assert calls.store.conn.execute("select count(*) from turns").fetchone()[0] == before
        assert calls.store.conn.execute("select count(*) from turn_commits").fetchone()[0] == 1

    def test_commits_build_the_assembled_context(self, client: TestClient) -> None:
        commit(client, "adv-1", "q1", "a1")
        commit(client, "adv-2", "q2", "a2")
        result = client.post("/v1/assemble", json={"sessionKey": "agent:main:k"}).json()
        assert [m["role"] for m in result["messages"]] == ["user", "assistant"] * 2
        assert result["messages"][2]["content"] == "q2"
        assert result["estimatedTokens"] > 0

    def test_session_key_is_persisted_and_listed(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        commit(client, "adv-1", "q1", "a1")
        found = EngineSessions(calls.store).find("openclaw", "agent:main:k")
        assert found is not None and found.session_id == "sid-1"
        assert calls.store.get_session("sid-1").title == "agent:main:k"

    def test_bad_message_writes_nothing(self, client: TestClient, calls: EngineCalls) -> None:
        response = client.post(
            "/v1/commitTurn",
            json={
                "advancementKey": "adv-x",
                "sessionKey": "k",
                "messages": [user("ok"), "not a message"],
            },
        )
        assert response.status_code == 400
        assert "messages" in response.json()["error"]
        assert calls.store.conn.execute("select count(*) from turn_commits").fetchone()[0] == 0

    def test_missing_advancement_key_is_a_clear_400(self, client: TestClient) -> None:
        response = client.post("/v1/commitTurn", json={"sessionKey": "k", "messages": []})
        assert response.status_code == 400
        assert "advancementKey" in response.json()["error"]


class TestAssemble:
    def test_unknown_session_asks_for_history_then_imports_it_once(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        first = client.post("/v1/assemble", json={"sessionKey": "old", "sessionId": "old-1"}).json()
        assert first == {"needsHistory": True}
        history = [user("before nexus"), assistant("earlier answer")]
        second = client.post(
            "/v1/assemble", json={"sessionKey": "old", "sessionId": "old-1", "messages": history}
        ).json()
        assert second["importedMessages"] == 2
        assert next(m["content"] for m in second["messages"]) == "before nexus"
        third = client.post(
            "/v1/assemble", json={"sessionKey": "old", "sessionId": "old-1", "messages": history}
        ).json()
        assert "importedMessages" not in third
        assert calls.store.get_session("old-1").turn_count == 1

    def test_budget_drops_oldest(self, client: TestClient) -> None:
        for i in range(6):
            commit(client, f"adv-{i}", f"question {i} " + "x" * 400, f"answer {i} " + "y" * 400)
        full = client.post("/v1/assemble", json={"sessionKey": "agent:main:k"}).json()
        small = client.post(
            "/v1/assemble", json={"sessionKey": "agent:main:k", "tokenBudget": 500}
        ).json()
        assert small["estimatedTokens"] <= 500 < full["estimatedTokens"]
        assert small["messages"][-1] == full["messages"][-1]

    def test_workspace_files_become_system_prompt_addition(
        self, client: TestClient, tmp_path: Path
    ) -> None:
        (tmp_path / "AGENTS.md").write_text("Always answer in haiku.")
        commit(client, "adv-1", "q1", "a1")
        result = client.post(
            "/v1/assemble", json={"sessionKey": "agent:main:k", "workspaceDir": str(tmp_path)}
        ).json()
        assert "Always answer in haiku." in result["systemPromptAddition"]


class TestCompactAndSpawn:
    def test_compact_adds_a_summary_and_keeps_every_turn(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        for i in range(4):
            commit(client, f"adv-{i}", f"question {i}", f"answer {i}")
        turns = calls.store.conn.execute("select count(*) from turns").fetchone()[0]
        result = client.post(
            "/v1/compact",
            json={"sessionKey": "agent:main:k", "force": True, "options": {"keepRecentTokens": 0}},
        ).json()
        assert result["ok"] and result["compacted"], result
        assert result["result"]["summary"]
        assembled = client.post("/v1/assemble", json={"sessionKey": "agent:main:k"}).json()
        assert assembled["messages"][0]["role"] == "compactionSummary"
        assert calls.store.conn.execute("select count(*) from turns").fetchone()[0] == turns + 1

    def test_fork_child_sees_parent_path_without_copying(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        commit(client, "adv-1", "parent question", "parent answer")
        turns = calls.store.conn.execute("select count(*) from turns").fetchone()[0]
        prepared = client.post(
            "/v1/prepareSubagentSpawn",
            json={
                "parentSessionKey": "agent:main:k",
                "childSessionKey": "agent:main:sub",
                "contextMode": "fork",
            },
        ).json()
        assert prepared["created"]
        assert client.post("/v1/assemble", json={"sessionKey": "agent:main:sub"}).json() == {
            "needsHistory": True
        }
        child = client.post(
            "/v1/assemble", json={"sessionKey": "agent:main:sub", "messages": []}
        ).json()
        assert next(m.get("content") for m in child["messages"]) == "parent question"
        assert calls.store.conn.execute("select count(*) from turns").fetchone()[0] == turns
        commit(client, "adv-c1", "child question", "child answer", session="agent:main:sub")
        child = client.post("/v1/assemble", json={"sessionKey": "agent:main:sub"}).json()
        assert [m["role"] for m in child["messages"]] == ["user", "assistant"] * 2

    def test_fork_child_keeps_the_parents_turn_in_progress(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        commit(client, "adv-1", "parent question", "parent answer")
        client.post(
            "/v1/prepareSubagentSpawn",
            json={
                "parentSessionKey": "agent:main:k",
                "childSessionKey": "agent:main:f",
                "contextMode": "fork",
            },
        )
        # OpenClaw's fork: the parent's transcript, with the turn still in progress
        forked = [user("parent question"), assistant("parent answer"), user("spawn a helper")]
        child = client.post(
            "/v1/assemble", json={"sessionKey": "agent:main:f", "messages": forked}
        ).json()
        assert [m["content"] for m in child["messages"] if m["role"] == "user"] == [
            "parent question",
            "spawn a helper",
        ]
        assert child["importedMessages"] == 1
        parent = client.post("/v1/assemble", json={"sessionKey": "agent:main:k"}).json()
        assert len(parent["messages"]) == 2  # the parent's own turns are untouched

    def test_isolated_child_is_empty_and_rollback_removes_it(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        commit(client, "adv-1", "parent question", "parent answer")
        prepared = client.post(
            "/v1/prepareSubagentSpawn",
            json={
                "parentSessionKey": "agent:main:k",
                "childSessionKey": "agent:main:iso",
                "contextMode": "isolated",
            },
        ).json()
        child_id = prepared["childSessionId"]
        child = client.post(
            "/v1/assemble", json={"sessionKey": "agent:main:iso", "messages": []}
        ).json()
        assert child["messages"] == []
        assert client.post(
            "/v1/rollbackSubagentSpawn", json={"childSessionKey": "agent:main:iso"}
        ).json() == {"rolledBack": True}
        assert calls.store.find_session(child_id) is None
        assert EngineSessions(calls.store).find("openclaw", "agent:main:iso") is None

    def test_subagent_end_is_persisted(self, client: TestClient, calls: EngineCalls) -> None:
        commit(client, "adv-1", "q", "a")
        client.post(
            "/v1/prepareSubagentSpawn",
            json={
                "parentSessionKey": "agent:main:k",
                "childSessionKey": "agent:main:s2",
                "contextMode": "fork",
            },
        )
        ended = client.post(
            "/v1/onSubagentEnded", json={"childSessionKey": "agent:main:s2", "reason": "completed"}
        ).json()
        assert ended["recorded"]
        # a new process (a new EngineCalls) still knows the mapping and the end
        found = EngineSessions(calls.store).find("openclaw", "agent:main:s2")
        assert (
            found is not None and found.ended_reason == "completed" and found.context_mode == "fork"
        )


class TestAccess:
    def test_request_without_token_is_401(self, calls: EngineCalls) -> None:
        bare = TestClient(create_app(calls, TOKEN), client=LOCAL)
        assert bare.post("/v1/commitTurn", json={}).status_code == 401
        wrong = TestClient(
            create_app(calls, TOKEN), client=LOCAL, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.get("/v1/health").status_code == 401
        assert calls.store.conn.execute("select count(*) from sessions").fetchone()[0] == 0

    def test_non_loopback_client_is_refused(self, calls: EngineCalls) -> None:
        remote = TestClient(
            create_app(calls, TOKEN),
            client=("192.0.2.7", 40000),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        response = remote.post("/v1/commitTurn", json={"advancementKey": "a", "sessionKey": "k"})
        assert response.status_code == 403
        assert calls.store.conn.execute("select count(*) from sessions").fetchone()[0] == 0

    def test_openapi_lists_every_method(self, client: TestClient) -> None:
        spec = client.get("/openapi.json").json()
        assert spec == openapi()
        for method in (
            "commitTurn",
            "assemble",
            "compact",
            "prepareSubagentSpawn",
            "onSubagentEnded",
        ):
            assert f"/v1/{method}" in spec["paths"]

    def test_not_json_is_a_clear_400(self, client: TestClient) -> None:
        response = client.post("/v1/assemble", content=b"{nope")
        assert response.status_code == 400
        assert "not JSON" in response.json()["error"]


# -- the real process ------------------------------------------------------------------


def start(db: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nexus_store", "--db", str(db), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    files = ServiceFiles(db.resolve())
    deadline = time.monotonic() + 60
    while running(files) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(proc.communicate()[1].decode())
        time.sleep(0.05)
    return proc


@pytest.mark.slow
class TestProcess:
    def test_token_file_is_private_and_lock_keeps_one_service(self, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        proc = start(db)
        try:
            files = ServiceFiles(db.resolve())
            assert files.token.stat().st_mode & 0o777 == 0o600
            second = subprocess.run(
                [sys.executable, "-m", "nexus_store", "--db", str(db), "serve", "--json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 0
            assert json.loads(second.stdout)["pid"] == proc.pid
            info = running(files)
            assert info is not None and info.url.startswith("http://127.0.0.1:")
        finally:
            stopped = subprocess.run(
                [sys.executable, "-m", "nexus_store", "--db", str(db), "serve", "--stop", "--json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert json.loads(stopped.stdout)["pid"] == proc.pid
            assert proc.wait(timeout=30) == 0  # SIGTERM is a clean stop
        assert not files.state.exists()
        assert running(files) is None

    def test_kill_9_and_restart_loses_nothing(self, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        proc = start(db)
        with ServiceClient(db) as c:
            c.call(
                "commitTurn",
                {
                    "advancementKey": "a1",
                    "sessionKey": "k",
                    "messages": [user("one"), assistant("1")],
                },
            )
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        info = ensure_running(db)  # the stale state file and socket do not stop a restart
        try:
            with ServiceClient(db) as c:
                again = c.call(
                    "commitTurn",
                    {"advancementKey": "a1", "sessionKey": "k", "messages": [user("one")]},
                )
                assert again["status"] == "duplicate"
                c.call(
                    "commitTurn",
                    {
                        "advancementKey": "a2",
                        "sessionKey": "k",
                        "messages": [user("two"), assistant("2")],
                    },
                )
                result = c.call("assemble", {"sessionKey": "k"})
            assert [m["content"] for m in result["messages"] if m["role"] == "user"] == [
                "one",
                "two",
            ]
        finally:
            os.kill(info.pid, signal.SIGTERM)

    def test_service_down_is_one_clear_error(self, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        with pytest.raises(ServiceUnavailable, match="no service runs"):
            ServiceClient(db)

    def test_only_loopback_is_bound(self, tmp_path: Path) -> None:
        db = tmp_path / "s.db"
        proc = start(db)
        try:
            info = running(ServiceFiles(db.resolve()))
            assert info is not None
            port = int(info.url.rsplit(":", 1)[1])
            others = {
                addr[4][0]
                for addr in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
                if not addr[4][0].startswith("127.")
            }
            for address in others:
                with pytest.raises(OSError):
                    socket.create_connection((address, port), timeout=2).close()
            with ServiceClient(db, unix_socket=False) as c:
                assert c.call("session", {"sessionKey": "none"}) is None
        except ServiceError as err:
            assert err.status == 400
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    def test_token_readable_by_others_is_refused(self, tmp_path: Path) -> None:
        files = ServiceFiles(tmp_path / "s.db")
        read_token(files, create=True)
        files.token.chmod(0o644)
        with pytest.raises(Exception, match="readable by others"):
            read_token(files)


class TestPlugin:
    def test_plugin_ships_its_manifest_entry_and_schema(self) -> None:
        from nexus_store.cli.openclaw import _plugin_config
        from nexus_store.integrations import openclaw_plugin_dir
        from nexus_store.service.lifecycle import ENGINE_ID

        folder = openclaw_plugin_dir()
        manifest = json.loads((folder / "openclaw.plugin.json").read_text())
        package = json.loads((folder / "package.json").read_text())
        assert manifest["id"] == ENGINE_ID and manifest["kind"] == "context-engine"
        assert package["openclaw"]["extensions"] == ["./index.js"]
        assert (folder / "index.js").is_file()
        # everything `openclaw install` writes is allowed by the strict config schema
        written = _plugin_config(Path("/x.db"), "openai", "legacy", 10)
        assert set(written) <= set(manifest["configSchema"]["properties"])
        assert manifest["configSchema"]["additionalProperties"] is False

    def test_install_without_openclaw_prints_the_steps(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from click.testing import CliRunner

        from nexus_store.cli import cli

        monkeypatch.setenv("PATH", str(tmp_path))  # no openclaw here
        result = CliRunner().invoke(cli, ["--db", str(tmp_path / "s.db"), "openclaw", "install"])
        assert result.exit_code == 1
        assert "openclaw plugins install -l" in result.output
        assert "plugins.slots.contextEngine nexus-store" in result.output
        assert str(tmp_path / "s.db") in result.output


pytest_plugins = ["tests.pg_server"]


class TestPostgres:
    def test_commits_are_idempotent_and_forks_work_on_postgres(self, pg_url: str) -> None:
        with Store(pg_url, counter="chars4") as store:
            client = TestClient(
                create_app(EngineCalls(store), TOKEN),
                client=LOCAL,
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert commit(client, "pg-1", "q1", "a1")["status"] == "committed"
            assert commit(client, "pg-1", "q1", "a1")["status"] == "duplicate"
            assert store.conn.execute("select count(*) from turn_commits").fetchone()[0] == 1
            client.post(
                "/v1/prepareSubagentSpawn",
                json={
                    "parentSessionKey": "agent:main:k",
                    "childSessionKey": "agent:main:c",
                    "contextMode": "fork",
                },
            )
            child = client.post(
                "/v1/assemble", json={"sessionKey": "agent:main:c", "messages": []}
            ).json()
            assert child["messages"][0]["content"] == "q1"

    @pytest.mark.slow
    def test_serve_runs_on_a_postgresql_url(
        self, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`nexus-store --db postgresql://... serve`: its files live in the state folder
        under a key of the URL; the Python client and the plugin's Node client find it."""
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        files = ServiceFiles.of(pg_url)
        assert files.base.parent == state_dir(pg_url)
        assert files.base.parent.parent == tmp_path / "state" / "nexus_store" / "services"
        proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_store", "--db", pg_url, "serve", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while (info := running(files)) is None:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.1)
            assert info.database == redact(pg_url) and info.pid == proc.pid
            assert files.token.stat().st_mode & 0o777 == 0o600
            assert files.base.parent.stat().st_mode & 0o777 == 0o700
            assert running(files) is not None
            with ServiceClient(pg_url) as c:
                for status in ("committed", "duplicate"):
                    done = c.call(
                        "commitTurn",
                        {
                            "advancementKey": "pg-a1",
                            "sessionKey": "agent:main:pg",
                            "messages": [user("on postgres"), assistant("yes")],
                        },
                    )
                    assert done["status"] == status
            second = subprocess.run(
                [sys.executable, "-m", "nexus_store", "--db", pg_url, "serve", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert second.returncode == 0 and json.loads(second.stdout)["pid"] == proc.pid
            node = os.environ.get("NEXUS_TEST_NODE") or shutil.which("node")
            if node:  # the plugin computes the same folder and reaches the same service
                from nexus_store.integrations import openclaw_plugin_dir

                index = (openclaw_plugin_dir() / "index.js").as_uri()
                script = (
                    f"import {{ ServiceClient }} from {json.dumps(index)};\n"
                    f"const c = new ServiceClient({{ db: {json.dumps(pg_url)}, command: ['false'] }});\n"
                    "const r = await c.call('assemble', { sessionKey: 'agent:main:pg' });\n"
                    "console.log(JSON.stringify(r.messages.map((m) => m.role)));\n"
                )
                ran = subprocess.run(
                    [node, "--input-type=module", "-e", script],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert ran.returncode == 0, ran.stderr
                assert json.loads(ran.stdout) == ["user", "assistant"]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        assert running(files) is None
        with Store(pg_url) as store:
            assert store.conn.execute("select count(*) from turn_commits").fetchone()[0] == 1

    def test_the_state_folder_of_a_url_ignores_its_password(self) -> None:
        a = state_dir("postgresql://me:secret@db.local/agents")
        assert a == state_dir("postgresql://me:other@db.local/agents")
        assert a != state_dir("postgresql://me@db.local/other")
        assert "secret" not in str(a)


class TestBadInput:
    @pytest.mark.parametrize("key", ["bad\ud800key", "nul\x00key"])
    def test_unstorable_session_key_is_a_400_and_writes_nothing(
        self, client: TestClient, calls: EngineCalls, key: str
    ) -> None:
        response = client.post(
            "/v1/commitTurn",
            content=json.dumps({"advancementKey": "a", "sessionKey": key, "messages": [user("x")]}),
        )
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "session key" in error or "surrogate" in error  # orjson refuses "\ud800" itself
        assert calls.store.conn.execute("select count(*) from sessions").fetchone()[0] == 0

    def test_message_that_cannot_be_stored_leaves_no_commit(
        self, client: TestClient, calls: EngineCalls
    ) -> None:
        bad = {"role": "user", "content": "bad \ud800 text", "timestamp": 1}
        response = client.post(
            "/v1/commitTurn",
            content=json.dumps({"advancementKey": "a", "sessionKey": "k", "messages": [bad]}),
        )
        assert response.status_code == 400, response.text
        assert calls.store.conn.execute("select count(*) from turn_commits").fetchone()[0] == 0
        assert calls.store.conn.execute("select count(*) from turns").fetchone()[0] == 0
        # the same key commits once the turn is fixed
        assert commit(client, "a", "fixed", "ok")["status"] == "committed"
