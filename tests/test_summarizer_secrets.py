"""The summarizer never shows a secret (issue 18, item 5): URL credentials, a key cut
by the truncation of an error body, a summary that echoes the key."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from nexus_store import Store
from nexus_store.cli import cli
from nexus_store.compaction.summarizer import HttpSummarizer
from nexus_store.errors import SummarizerError
from tests.http_server import ScriptedServer, chat_reply, scripted_server

__all__ = ["scripted_server"]  # the fixture, used by name

KEY = "sk-or-v1-0123456789abcdefSECRETKEYabcdef0123456789"
PASSWORD = "hunter2-url-password"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fragments(secret: str, size: int = 6) -> list[str]:
    """Every piece of ``secret`` long enough to matter."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def _leaks(text: str, secret: str) -> list[str]:
    return [f for f in _fragments(secret) if f in text]


class TestUrlCredentials:
    def test_error_repr_and_endpoint_never_show_the_password(self) -> None:
        url = f"http://user:{PASSWORD}@127.0.0.1:{_closed_port()}/v1"
        summarizer = HttpSummarizer(url, "m", env={}, max_retries=0)
        with pytest.raises(SummarizerError) as caught:
            summarizer.complete("hi")
        for shown in (
            str(caught.value),
            repr(summarizer),
            summarizer.endpoint,
            str(vars(summarizer)),
        ):
            assert PASSWORD not in shown and "user:" not in shown
        assert "127.0.0.1" in str(caught.value)  # still says where

    def test_credentials_are_still_sent(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("the summary"))
        host = scripted_server.url.split("://", 1)[1]
        summarizer = HttpSummarizer(f"http://user:{PASSWORD}@{host}", "m", env={})
        assert summarizer.complete("hi") == "the summary"
        sent = scripted_server.requests[-1].headers
        auth = {k.lower(): v for k, v in sent.items()}["authorization"]
        assert base64.b64decode(auth.split()[1]).decode() == f"user:{PASSWORD}"

    def test_cli_error_is_one_line_without_the_password(
        self, store_path: Path, runner: CliRunner
    ) -> None:
        with Store(store_path, counter="chars4") as store:
            sid = store.create_session(id="s").id
            for n in range(6):
                store.append_message(
                    sid, {"role": "user", "content": f"m{n} " * 50, "timestamp": n}
                )
        url = f"http://user:{PASSWORD}@127.0.0.1:{_closed_port()}/v1"
        result = runner.invoke(
            cli,
            [
                "--db",
                str(store_path),
                "compact",
                "s",
                "--summarizer",
                "openai",
                "--model",
                "m",
                "--base-url",
                url,
                "--keep-recent-tokens",
                "10",
                "-y",
            ],
            env={"NEXUS_SUMMARIZER_API_KEY": KEY},
        )
        assert result.exit_code == 1, result.output
        assert PASSWORD not in result.output and not _leaks(result.output, KEY)


def _mock(handler: Any) -> HttpSummarizer:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return HttpSummarizer(
        "http://mock/v1",
        "m",
        api_key=KEY,
        client=client,
        env={},
        max_retries=0,
        sleep=lambda s: None,
    )


class TestMaskBeforeTruncating:
    @pytest.mark.parametrize("offset", [180, 190, 195, 280, 290, 295])
    @pytest.mark.parametrize("shape", ["error.message", "error", "message", "text", "other"])
    def test_an_echoed_key_straddling_the_cut_is_never_partly_shown(
        self, offset: int, shape: str
    ) -> None:
        echoed = "x" * offset + f"Authorization: Bearer {KEY} " + "y" * 400

        def handler(request: httpx.Request) -> httpx.Response:
            bodies: dict[str, Any] = {
                "error.message": {"error": {"message": echoed}},
                "error": {"error": echoed},
                "message": {"message": echoed},
                "other": {"detail": echoed},
            }
            if shape == "text":
                return httpx.Response(400, text=echoed)
            return httpx.Response(400, json=bodies[shape])

        with pytest.raises(SummarizerError) as caught:
            _mock(handler).complete("hi")
        assert _leaks(str(caught.value), KEY) == []

    @pytest.mark.parametrize("offset", [150, 185, 195])
    def test_malformed_and_shapeless_replies_are_masked_first(self, offset: int) -> None:
        echoed = "z" * offset + KEY + "z" * 300
        for reply in (
            httpx.Response(200, text="{not json " + echoed),
            httpx.Response(200, json={"unexpected": echoed}),
        ):
            with pytest.raises(SummarizerError) as caught:
                _mock(lambda request, r=reply: r).complete("hi")
            assert _leaks(str(caught.value), KEY) == []


class TestSummaryEchoingTheKey:
    def test_the_key_never_reaches_turns_summary(self, store: Store) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content)
            assert body["model"] == "m"
            content = f"## Goal\nkeep going. The header was Bearer {KEY} and user:{PASSWORD}"
            return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

        client = httpx.Client(transport=httpx.MockTransport(handler))
        summarizer = HttpSummarizer(
            f"http://user:{PASSWORD}@mock/v1", "m", api_key=KEY, client=client, env={}
        )
        sid = store.create_session().id
        for n in range(8):
            store.append_message(
                sid, {"role": "user", "content": f"step {n} " * 40, "timestamp": n}
            )
        result = store.compact(sid, summarizer=summarizer, keep_recent_tokens=10)
        assert result.turn is not None
        stored = [
            r[0] for r in store.conn.execute("select summary from turns where summary is not null")
        ]
        assert stored and all(KEY not in s and PASSWORD not in s for s in stored)
        assert "***" in stored[-1] and "keep going" in stored[-1]
