"""Sync of a store written by OpenClaw itself: real turns and a real compaction.

`openclaw agent --local` runs three turns against a fake OpenAI-compatible server on
127.0.0.1 (started here); its config makes the third turn compact first
(``maxActiveTranscriptBytes``). Sync runs while OpenClaw writes its database, then
every imported session's context must equal pi's semantics (tests/reference.py)
computed from OpenClaw's own ``transcript_events`` rows.

Needs Node >= 24.16 and the ``openclaw`` npm package: ``NEXUS_TEST_NODE`` (the node
binary) and ``NEXUS_TEST_OPENCLAW`` (the package folder, or its openclaw.mjs); .ci/run
installs both. Skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import zstandard

from nexus_store import Store
from nexus_store.sync import sync_paths
from tests.reference import reference_context


def _openclaw() -> tuple[str, Path]:
    node = os.environ.get("NEXUS_TEST_NODE")
    package = os.environ.get("NEXUS_TEST_OPENCLAW")
    if not node or not package:
        pytest.skip("NEXUS_TEST_NODE and NEXUS_TEST_OPENCLAW are not set (.ci/run sets them)")
    entry = Path(package)
    if entry.is_dir():
        entry = entry / "openclaw.mjs"
    if not entry.is_file():
        pytest.skip(f"NEXUS_TEST_OPENCLAW: no openclaw.mjs at {entry}")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    except OSError as err:
        pytest.skip(f"NEXUS_TEST_NODE={node} does not run: {err}")
    found = re.match(r"v(\d+)\.(\d+)", version.strip())
    if not found or (int(found[1]), int(found[2])) < (24, 16):
        pytest.skip(f"OpenClaw needs Node >= 24.16; NEXUS_TEST_NODE is {version.strip()!r}")
    return node, entry


class _Model(BaseHTTPRequestHandler):
    """Chat completions (streamed or not) with a short fixed answer; /v1/models."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(
            json.dumps({"object": "list", "data": [{"id": "fake-model"}]}).encode(),
            "application/json",
        )

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        text = "Noted. " + "words " * 60
        usage = {"prompt_tokens": 100, "completion_tokens": 60, "total_tokens": 160}
        if not request.get("stream"):
            reply = {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "fake-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
            self._send(json.dumps(reply).encode(), "application/json")
            return
        chunks = [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": text},
                        "finish_reason": None,
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
        ]
        body = b"".join(
            b"data: "
            + json.dumps(
                {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake-model",
                    **c,
                }
            ).encode()
            + b"\n\n"
            for c in chunks
        )
        self._send(body + b"data: [DONE]\n\n", "text/event-stream")


@pytest.mark.slow
def test_a_store_written_by_openclaw_syncs_with_pi_context(tmp_path: Path) -> None:
    node, entry = _openclaw()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "home").mkdir()
    config = {
        "agents": {
            "defaults": {
                "model": {"primary": "fake/fake-model"},
                "workspace": str(tmp_path / "ws"),
                "compaction": {
                    "mode": "default",
                    "maxActiveTranscriptBytes": 3000,
                    "keepRecentTokens": 100,
                    "memoryFlush": {"enabled": False},
                },
            }
        },
        "models": {
            "mode": "merge",
            "providers": {
                "fake": {
                    "baseUrl": f"http://127.0.0.1:{server.server_address[1]}/v1",
                    "apiKey": "test",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 32000,
                            "maxTokens": 1000,
                        }
                    ],
                }
            },
        },
    }
    (state / "openclaw.json").write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(tmp_path / "home"), "OPENCLAW_STATE_DIR": str(state)}
    database = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"

    def turn(text: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                node,
                str(entry),
                "agent",
                "--local",
                "--agent",
                "main",
                "--session-key",
                "agent:main:sync",
                "-m",
                text,
                "--json",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    try:
        for text in ("first question", "second question"):
            run = turn(text)
            out, _ = run.communicate(timeout=600)
            assert run.returncode == 0, out[-2000:]
        with Store(tmp_path / "s.db", counter="chars4") as store:
            first = sync_paths(store, [database])
            assert first.errors == [] and first.turns > 0
            run = turn("third question")  # compacts first; sync reads while it writes
            while run.poll() is None:
                report = sync_paths(store, [database])
                assert report.errors == [] and report.conflicts == 0, report.errors
                time.sleep(0.5)
            out, _ = run.communicate()
            assert run.returncode == 0, out[-2000:]
            final = sync_paths(store, [database])
            assert final.errors == [] and final.conflicts == 0 and final.skipped == 0

            conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
            sessions = [
                r[0] for r in conn.execute("select distinct session_id from transcript_events")
            ]
            compactions = 0
            for sid in sessions:
                events = [
                    json.loads(
                        text if text is not None else zstandard.ZstdDecompressor().decompress(blob)
                    )
                    for text, blob in conn.execute(
                        "select event_json, event_zstd from transcript_events where session_id = ? order by seq",
                        [sid],
                    )
                ]
                entries = [e for e in events if e.get("type") != "session"]
                compactions += sum(e["type"] == "compaction" for e in entries)
                for e in entries:
                    assert (
                        store.context(sid, e["id"]).messages
                        == reference_context(entries, e["id"])["messages"]
                    )
            conn.close()
            assert compactions >= 1, "OpenClaw wrote no compaction"
            again = sync_paths(store, [database])
            assert (again.turns, again.unchanged) == (0, 1)
    finally:
        server.shutdown()
