from __future__ import annotations

import json
import logging
import random
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexus_store.compaction.extractive import SECTION_TITLES, ExtractiveSummarizer
from nexus_store.compaction.stages import (
    StagedSummary,
    format_tokens_k,
    group_units,
    summarize_in_stages,
)
from nexus_store.compaction.summarizer import HttpSummarizer, Summarizer, get_summarizer
from nexus_store.errors import SummarizerError
from nexus_store.tokens import CharsEstimator

try:
    from tests.http_server import Reply, ScriptedServer, chat_reply, scripted_server
except ImportError:  # tests/ itself on sys.path (pytest's default rootdir-less import)
    from http_server import (  # type: ignore[no-redef]
        Reply,
        ScriptedServer,
        chat_reply,
        scripted_server,
    )

__all__ = ["scripted_server"]  # the fixture, re-exported for pytest

KEY = "sk-test-SECRET-0123456789"

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the login bug in src/auth.py", "timestamp": 1},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading the file."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/auth.py"}},
        ],
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "def login(): pass"}],
        "isError": False,
    },
]


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def assert_no_key(err: BaseException, summarizer: HttpSummarizer | None = None) -> None:
    texts = [str(err), repr(err), *(str(a) for a in err.args)]
    if summarizer is not None:
        texts.append(repr(summarizer))
        texts.append(str(vars(summarizer)))
    for text in texts:
        assert KEY not in text
    # no httpx exception (whose request holds the Authorization header) is chained
    assert err.__cause__ is None
    assert err.__context__ is None


def make(server: ScriptedServer, **kw: Any) -> HttpSummarizer:
    kw.setdefault("api_key", KEY)
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("env", {})
    return HttpSummarizer(server.url, "test-model", **kw)


# -- against a real HTTP server on 127.0.0.1 ---------------------------------------------


class TestHttpSummarizerRealServer:
    def test_success_sends_openai_request_and_returns_content(
        self, scripted_server: ScriptedServer
    ) -> None:
        scripted_server.script(chat_reply("## Goal\n- fix login"))
        with make(scripted_server) as summarizer:
            out = summarizer.summarize(MESSAGES, instructions="keep error messages")
        assert out == "## Goal\n- fix login"
        (request,) = scripted_server.requests
        assert request.method == "POST"
        assert request.path == "/v1/chat/completions"
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        body = request.json()
        assert body["model"] == "test-model"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        prompt = body["messages"][1]["content"]
        assert "[User]: Fix the login bug in src/auth.py" in prompt
        assert 'read(path="src/auth.py")' in prompt
        assert "keep error messages" in prompt
        assert "<earlier-summary>" not in prompt
        assert body["max_tokens"] > 0

    def test_previous_summary_is_sent_for_update(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("updated"))
        make(scripted_server).summarize(MESSAGES, previous_summary="OLD SUMMARY TEXT")
        prompt = scripted_server.requests[0].json()["messages"][1]["content"]
        assert "<earlier-summary>\nOLD SUMMARY TEXT\n</earlier-summary>" in prompt

    def test_merge_sends_every_part_in_order(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("merged"))
        assert make(scripted_server).merge(["part one", "part two"]) == "merged"
        prompt = scripted_server.requests[0].json()["messages"][1]["content"]
        assert prompt.index("part one") < prompt.index("part two")

    def test_429_then_success_honours_retry_after(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(
            Reply(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "2"}),
            chat_reply("ok after wait"),
        )
        sleeps = Sleeps()
        assert make(scripted_server, sleep=sleeps).summarize(MESSAGES) == "ok after wait"
        assert len(scripted_server.requests) == 2
        assert sleeps.calls == [2.0]

    def test_retry_after_is_capped_by_max_backoff(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(
            Reply(429, {"error": "slow down"}, headers={"Retry-After": "3600"}), chat_reply("ok")
        )
        sleeps = Sleeps()
        make(scripted_server, sleep=sleeps, max_backoff=0.5).summarize(MESSAGES)
        assert sleeps.calls == [0.5]

    def test_real_sleep_between_retries(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(Reply(503, "busy", headers={"Retry-After": "0.2"}), chat_reply("ok"))
        started = time.monotonic()
        assert make(scripted_server, sleep=time.sleep).summarize(MESSAGES) == "ok"
        assert time.monotonic() - started >= 0.2

    def test_500_until_giving_up_counts_attempts(
        self, scripted_server: ScriptedServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        scripted_server.script(Reply(500, {"error": {"message": f"boom for {KEY}"}}))
        sleeps = Sleeps()
        summarizer = make(scripted_server, max_retries=2, sleep=sleeps, rng=random.Random(1))
        with caplog.at_level(logging.DEBUG), pytest.raises(SummarizerError) as info:
            summarizer.summarize(MESSAGES)
        assert len(scripted_server.requests) == 3
        assert len(sleeps.calls) == 2
        assert 1.0 <= sleeps.calls[0] <= 1.25 and 2.0 <= sleeps.calls[1] <= 2.5
        err = info.value
        assert err.status_code == 500
        assert "after 3 attempts" in str(err) and "HTTP 500" in str(err)
        assert_no_key(err, summarizer)
        assert "***" in str(err)  # the echoed key was scrubbed, not dropped silently
        assert KEY not in caplog.text
        assert "retrying" in caplog.text

    def test_stall_past_timeout_is_a_clear_error_not_retried(
        self, scripted_server: ScriptedServer
    ) -> None:
        scripted_server.script(Reply(delay=3.0, body={"choices": []}))
        summarizer = make(scripted_server, timeout=0.3)
        started = time.monotonic()
        with pytest.raises(SummarizerError) as info:
            summarizer.summarize(MESSAGES)
        assert time.monotonic() - started < 2.0
        assert len(scripted_server.requests) == 1
        assert info.value.status_code is None
        assert "timeout" in str(info.value) and "stalled" in str(info.value)
        assert_no_key(info.value, summarizer)

    def test_malformed_json(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(Reply(200, b"{not json at all"))
        with pytest.raises(SummarizerError) as info:
            make(scripted_server).summarize(MESSAGES)
        assert info.value.status_code == 200
        assert "malformed JSON" in str(info.value)
        assert len(scripted_server.requests) == 1
        assert_no_key(info.value)

    @pytest.mark.parametrize(
        "body",
        [
            {"choices": []},
            {"choices": [{"message": {"role": "assistant"}}]},
            {"choices": [{"message": {"content": None}}]},
            {"result": "no choices key"},
            [1, 2, 3],
        ],
    )
    def test_missing_message_content(self, scripted_server: ScriptedServer, body: Any) -> None:
        scripted_server.script(Reply(200, body))
        with pytest.raises(SummarizerError) as info:
            make(scripted_server).summarize(MESSAGES)
        assert info.value.status_code == 200
        assert "choices[0].message.content" in str(info.value)
        assert_no_key(info.value)

    def test_empty_content_is_an_error(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("   "))
        with pytest.raises(SummarizerError, match="empty summary"):
            make(scripted_server).summarize(MESSAGES)

    def test_401_is_not_retried_and_never_shows_the_key(
        self, scripted_server: ScriptedServer
    ) -> None:
        scripted_server.script(Reply(401, {"error": {"message": f"Incorrect API key: {KEY}"}}))
        summarizer = make(scripted_server, max_retries=3)
        with pytest.raises(SummarizerError) as info:
            summarizer.summarize(MESSAGES)
        assert len(scripted_server.requests) == 1
        assert info.value.status_code == 401
        assert "HTTP 401" in str(info.value) and "API key" in str(info.value)
        assert_no_key(info.value, summarizer)

    def test_dropped_connection_is_retried(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(Reply(drop=True), chat_reply("second time lucky"))
        assert make(scripted_server).summarize(MESSAGES) == "second time lucky"
        assert len(scripted_server.requests) == 2

    def test_connection_refused_retries_then_fails(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        sleeps = Sleeps()
        summarizer = HttpSummarizer(
            f"http://127.0.0.1:{port}/v1", "m", api_key=KEY, max_retries=1, sleep=sleeps, env={}
        )
        with pytest.raises(SummarizerError) as info:
            summarizer.summarize(MESSAGES)
        assert len(sleeps.calls) == 1
        assert info.value.status_code is None
        assert "connection error" in str(info.value) and "after 2 attempts" in str(info.value)
        assert_no_key(info.value, summarizer)

    def test_settings_from_environment(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("env ok"))
        env = {
            "NEXUS_SUMMARIZER_BASE_URL": scripted_server.url,
            "NEXUS_SUMMARIZER_MODEL": "env-model",
            "OPENROUTER_API_KEY": "or-key",
            "OPENAI_API_KEY": "oa-key",
        }
        assert HttpSummarizer(env=env).summarize(MESSAGES) == "env ok"
        request = scripted_server.requests[0]
        assert request.headers["Authorization"] == "Bearer or-key"
        assert request.json()["model"] == "env-model"

    def test_no_key_sends_no_authorization(self, scripted_server: ScriptedServer) -> None:
        scripted_server.script(chat_reply("local ok"))
        HttpSummarizer(scripted_server.url, "llama3.2", env={}).summarize(MESSAGES)
        assert "Authorization" not in scripted_server.requests[0].headers


# -- unit cases over httpx.MockTransport -----------------------------------------------------


def mock_summarizer(handler: Any, **kw: Any) -> tuple[HttpSummarizer, Sleeps]:
    sleeps = Sleeps()
    kw.setdefault("sleep", sleeps)
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return HttpSummarizer("http://mock/v1", "m", api_key=KEY, client=client, env={}, **kw), sleeps


class TestHttpSummarizerUnit:
    def test_content_as_list_of_parts_is_joined(self) -> None:
        def handler(request: httpx.Request) -> httpx.Response:
            content = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
            return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

        summarizer, _ = mock_summarizer(handler)
        assert summarizer.summarize(MESSAGES) == "ab"

    def test_400_is_not_retried(self) -> None:
        calls = []

        def handler(request: httpx.Request) -> httpx.Response:
            calls.append(request)
            return httpx.Response(400, json={"error": {"message": "bad max_tokens"}})

        summarizer, sleeps = mock_summarizer(handler)
        with pytest.raises(SummarizerError, match="bad max_tokens") as info:
            summarizer.summarize(MESSAGES)
        assert info.value.status_code == 400 and len(calls) == 1 and sleeps.calls == []

    def test_http_date_retry_after(self) -> None:
        responses = iter(
            [
                httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
                httpx.Response(200, json={"choices": [{"message": {"content": "x"}}]}),
            ]
        )
        summarizer, sleeps = mock_summarizer(lambda r: next(responses))
        summarizer.summarize(MESSAGES)
        assert sleeps.calls == [0.0]  # a date in the past means "now"

    def test_read_timeout_not_retried_connect_timeout_retried(self) -> None:
        def read_timeout(request: httpx.Request) -> httpx.Response:
            raise httpx.ReadTimeout("read timed out", request=request)

        summarizer, sleeps = mock_summarizer(read_timeout)
        with pytest.raises(SummarizerError, match="timeout") as info:
            summarizer.summarize(MESSAGES)
        assert sleeps.calls == []
        assert_no_key(info.value)

        def connect_timeout(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectTimeout("connect timed out", request=request)

        summarizer, sleeps = mock_summarizer(connect_timeout, max_retries=2)
        with pytest.raises(SummarizerError, match="after 3 attempts") as info:
            summarizer.summarize(MESSAGES)
        assert len(sleeps.calls) == 2
        assert_no_key(info.value)

    def test_backoff_grows_exponentially_with_bounded_jitter(self) -> None:
        summarizer, sleeps = mock_summarizer(
            lambda r: httpx.Response(502, text="bad gateway"),
            max_retries=4,
            backoff=0.5,
            max_backoff=3.0,
            rng=random.Random(7),
        )
        with pytest.raises(SummarizerError):
            summarizer.summarize(MESSAGES)
        lows = [0.5, 1.0, 2.0, 3.0]
        assert len(sleeps.calls) == 4
        for got, low in zip(sleeps.calls, lows, strict=True):
            assert low <= got <= min(low * 1.25, 3.0)

    def test_repr_hides_key(self) -> None:
        summarizer, _ = mock_summarizer(lambda r: httpx.Response(200))
        assert KEY not in repr(summarizer) and "'***'" in repr(summarizer)
        assert summarizer.has_api_key

    def test_missing_model_is_a_clear_error(self) -> None:
        with pytest.raises(SummarizerError, match="NEXUS_SUMMARIZER_MODEL"):
            HttpSummarizer("http://127.0.0.1:1/v1", env={})

    def test_base_url_must_be_http(self) -> None:
        with pytest.raises(SummarizerError, match="must start with http"):
            HttpSummarizer("127.0.0.1:8080/v1", "m", env={})

    def test_default_base_url_follows_key_source(self) -> None:
        s = HttpSummarizer(model="m", env={"OPENROUTER_API_KEY": "k"})
        assert s.base_url == "https://openrouter.ai/api/v1"
        s = HttpSummarizer(model="m", env={"OPENAI_API_KEY": "k"})
        assert s.base_url == "https://api.openai.com/v1"
        s = HttpSummarizer(model="m", api_key="explicit", env={"OPENROUTER_API_KEY": "k"})
        assert s.base_url == "https://api.openai.com/v1"


class TestGetSummarizer:
    def test_kinds(self) -> None:
        assert isinstance(get_summarizer("extractive"), ExtractiveSummarizer)
        http = get_summarizer("openai", base_url="http://127.0.0.1:9/v1", model="m", env={})
        assert isinstance(http, HttpSummarizer)
        assert isinstance(http, Summarizer)

    def test_unknown_kind_and_bad_options(self) -> None:
        with pytest.raises(SummarizerError, match="unknown summarizer"):
            get_summarizer("gpt")
        with pytest.raises(SummarizerError, match="takes no options"):
            get_summarizer("extractive", model="x")
        with pytest.raises(SummarizerError, match="invalid options"):
            get_summarizer("openai", model="m", env={}, colour="red")


# -- the extractive summarizer ---------------------------------------------------------------


def conversation() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": "Refactor the auth module to use JWT. Always add type hints. "
            "Don't touch db/schema.sql.",
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll use RS256 instead of HS256 for public-key checks."},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "read",
                    "arguments": {"path": "README.md"},
                },
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "# project"}],
            "isError": False,
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "toolCall",
                    "id": "c2",
                    "name": "write",
                    "arguments": {"path": "src/jwt.py"},
                }
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c2",
            "toolName": "write",
            "content": [{"type": "text", "text": "wrote 40 lines"}],
            "isError": False,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": "c3", "name": "bash", "arguments": {"command": "pytest"}}
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c3",
            "toolName": "bash",
            "content": [{"type": "text", "text": "E   KeyError: 'kid' in verify_token\n..."}],
            "isError": True,
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Next, I'll add the kid header."}],
        },
    ]


def section(summary: str, title: str) -> str:
    start = summary.index(f"## {title}\n")
    rest = summary[start + len(title) + 4 :]
    end = rest.find("\n## ")
    return rest if end == -1 else rest[:end]


class TestExtractiveSummarizer:
    def test_deterministic(self) -> None:
        a = ExtractiveSummarizer().summarize(conversation())
        b = ExtractiveSummarizer().summarize(json.loads(json.dumps(conversation())))
        assert a == b

    def test_fills_every_section_from_the_messages(self) -> None:
        s = ExtractiveSummarizer().summarize(conversation())
        for title in SECTION_TITLES:
            assert f"## {title}\n" in s
        assert "Refactor the auth module to use JWT." in section(s, "Goal")
        constraints = section(s, "Constraints & Preferences")
        assert "Always add type hints." in constraints
        assert "Don't touch db/schema.sql." in constraints
        progress = section(s, "Progress")
        assert "- [x] Wrote `src/jwt.py`" in progress
        assert "- [ ] Refactor the auth module to use JWT." in progress
        assert "KeyError: 'kid' in verify_token" in progress.split("### Blocked")[1]
        assert "RS256 instead of HS256" in section(s, "Key Decisions")
        assert "1. Next, I'll add the kid header." in section(s, "Next Steps")
        assert "Error from `bash`: E   KeyError: 'kid'" not in s  # whitespace normalised
        assert "Error from `bash`: E KeyError: 'kid' in verify_token" in section(
            s, "Critical Context"
        )
        files = section(s, "Files")
        assert "### Read\n- README.md" in files and "### Modified\n- src/jwt.py" in files

    def test_resolved_error_is_not_blocked(self) -> None:
        msgs = [
            *conversation(),
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": "c4",
                        "name": "bash",
                        "arguments": {"command": "pytest"},
                    }
                ],
            },
            {
                "role": "toolResult",
                "toolCallId": "c4",
                "toolName": "bash",
                "content": [{"type": "text", "text": "5 passed"}],
                "isError": False,
            },
        ]
        s = ExtractiveSummarizer().summarize(msgs)
        assert "### Blocked\n- (none)" in s
        assert "KeyError" in section(s, "Critical Context")  # the error text is kept as context

    def test_previous_summary_is_updated_not_dropped(self) -> None:
        first = ExtractiveSummarizer().summarize(conversation())
        later = [
            {"role": "user", "content": "Now add refresh tokens. Prefer 7 day expiry."},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": "d1",
                        "name": "edit",
                        "arguments": {"path": "src/refresh.py"},
                    }
                ],
            },
            {"role": "toolResult", "toolCallId": "d1", "toolName": "edit", "content": "ok"},
        ]
        second = ExtractiveSummarizer().summarize(later, previous_summary=first)
        goal = section(second, "Goal")
        assert "Refactor the auth module to use JWT." in goal and "Now add refresh tokens." in goal
        constraints = section(second, "Constraints & Preferences")
        assert "Always add type hints." in constraints and "Prefer 7 day expiry." in constraints
        progress = section(second, "Progress")
        assert "Wrote `src/jwt.py`" in progress and "Edited `src/refresh.py`" in progress
        in_progress = progress.split("### In Progress")[1].split("###")[0]
        assert "Now add refresh tokens." in in_progress and "Refactor" not in in_progress
        assert "RS256" in section(second, "Key Decisions")
        files = section(second, "Files")
        assert "README.md" in files and "src/jwt.py" in files and "src/refresh.py" in files

    def test_foreign_previous_summary_is_carried_verbatim(self) -> None:
        prose = (
            "The user and agent debugged a flaky CI job; "
            "root cause was a race in tests/conftest.py."
        )
        s = ExtractiveSummarizer().summarize(conversation(), previous_summary=prose)
        assert "## Earlier Notes\n" + prose in s
        # and survives another round
        again = ExtractiveSummarizer().summarize(
            [{"role": "user", "content": "thanks"}], previous_summary=s
        )
        assert prose in again

    def test_pi_file_blocks_in_previous_summary_become_file_lists(self) -> None:
        prev = (
            "## Goal\n- x\n\n<read-files>\na.py\n</read-files>\n\n"
            "<modified-files>\nb.py\n</modified-files>"
        )
        s = ExtractiveSummarizer().summarize([], previous_summary=prev)
        files = section(s, "Files")
        assert "### Read\n- a.py" in files and "### Modified\n- b.py" in files
        assert "<read-files>" not in s

    def test_instructions_are_recorded(self) -> None:
        s = ExtractiveSummarizer().summarize(conversation(), instructions="the JWT key rotation")
        assert "Focus requested: the JWT key rotation" in section(s, "Critical Context")

    def test_merge_combines_sections_in_order(self) -> None:
        ex = ExtractiveSummarizer()
        a = ex.summarize(conversation()[:3])
        b = ex.summarize([{"role": "user", "content": "Also update the changelog."}])
        merged = ex.merge([a, b])
        goal = section(merged, "Goal")
        assert goal.index("Refactor the auth") < goal.index("Also update the changelog.")
        assert "- [ ] Also update the changelog." in merged
        assert ex.merge([a]) == ex.merge([a])


# -- staged summarization ------------------------------------------------------------------


class FakeSummarizer:
    """Records calls; fails on a message whose "size" exceeds ``fail_above``, or always."""

    def __init__(
        self,
        *,
        fail_above: int | None = None,
        always_fail: bool = False,
        merge_fails: bool = False,
        status: int | None = 413,
    ) -> None:
        self.calls: list[tuple[list[Mapping[str, Any]], str | None]] = []
        self.merges: list[list[str]] = []
        self.fail_above = fail_above
        self.always_fail = always_fail
        self.merge_fails = merge_fails
        self.status = status

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = 4096,
    ) -> str:
        self.calls.append((list(messages), previous_summary))
        if self.always_fail or (
            self.fail_above is not None
            and any(m.get("size", 0) > self.fail_above for m in messages)
        ):
            raise SummarizerError("too large", status_code=self.status)
        return f"S{len(self.calls)}"

    def merge(self, summaries: Sequence[str], *, instructions: str | None = None) -> str:
        self.merges.append(list(summaries))
        if self.merge_fails:
            raise SummarizerError("merge failed", status_code=500)
        return "MERGED(" + "+".join(summaries) + ")"


def sized(role: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"role": role, "size": size, **extra}


def tool_session(n_turns: int, results_per_call: int = 2) -> tuple[list[dict[str, Any]], list[int]]:
    msgs: list[dict[str, Any]] = []
    for t in range(n_turns):
        msgs.append(sized("user", 10))
        calls = [
            {"type": "toolCall", "id": f"t{t}c{k}", "name": "bash", "arguments": {}}
            for k in range(results_per_call)
        ]
        msgs.append(sized("assistant", 20, content=calls))
        for k in range(results_per_call):
            msgs.append(sized("toolResult", 300, toolCallId=f"t{t}c{k}", toolName="bash"))
    return msgs, [m["size"] for m in msgs]


def assert_calls_keep_tool_pairs(calls: list[tuple[list[Mapping[str, Any]], str | None]]) -> None:
    for chunk, _ in calls:
        ids = {
            block["id"] for m in chunk if m["role"] == "assistant" for block in m.get("content", [])
        }
        for m in chunk:
            if m["role"] == "toolResult":
                assert m["toolCallId"] in ids, "a toolResult was separated from its toolCall"


class TestStagedSummarization:
    def test_chunks_never_split_tool_call_from_results(self) -> None:
        msgs, tokens = tool_session(6)
        fake = FakeSummarizer()
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=500,
            context_window=10_000,
            parts=1,
            tokens=tokens,
        )
        assert len(fake.calls) > 3  # it really chunked
        assert_calls_keep_tool_pairs(fake.calls)
        assert sum(len(c) for c, _ in fake.calls) == len(msgs)
        assert not out.partial and out.stages == len(fake.calls)

    def test_rolling_summary_fed_forward(self) -> None:
        msgs, tokens = tool_session(4)
        fake = FakeSummarizer()
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=700,
            context_window=10_000,
            previous_summary="PREV",
            parts=1,
            tokens=tokens,
        )
        previous = [p for _, p in fake.calls]
        assert previous[0] == "PREV"
        assert previous[1:] == [f"S{i}" for i in range(1, len(fake.calls))]
        assert out.summary == f"S{len(fake.calls)}"

    def test_parts_are_merged(self) -> None:
        msgs, tokens = tool_session(6)
        fake = FakeSummarizer()
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=1000,
            context_window=10_000,
            parts=2,
            tokens=tokens,
        )
        assert len(fake.merges) == 1 and len(fake.merges[0]) == 2
        assert out.summary.startswith("MERGED(")
        assert out.stages == len(fake.calls) + 1
        assert_calls_keep_tool_pairs(fake.calls)

    def test_oversized_message_left_out_with_note(self) -> None:
        msgs = [
            sized("user", 100),
            sized("toolResult", 15_000, toolName="read"),
            sized("user", 100),
        ]
        tokens = [m["size"] for m in msgs]
        fake = FakeSummarizer(fail_above=10_000)
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=50_000,
            context_window=20_000,
            tokens=tokens,
        )
        note = "[Large toolResult (~15K tokens) omitted from summary]"
        assert out.partial and out.omitted == [note]
        assert note in out.summary
        last_call = fake.calls[-1][0]
        assert all(m["size"] <= 10_000 for m in last_call) and len(last_call) == 2

    def test_part_that_cannot_be_summarized_becomes_a_note(self) -> None:
        # every message of part 2 is oversized (> half the window) and fails
        msgs = [
            sized("user", 100),
            sized("assistant", 100),
            sized("user", 60_000),
            sized("user", 60_000),
        ]
        tokens = [m["size"] for m in msgs]
        fake = FakeSummarizer(fail_above=1000)
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=50_000,
            context_window=100_000,
            parts=2,
            tokens=tokens,
            previous_summary=None,
        )
        assert out.partial
        assert (
            "Context contained 2 messages (2 oversized). Summary unavailable due to size limits."
            in out.omitted
        )
        assert out.summary.startswith("S1")

    def test_merge_failure_joins_partials(self) -> None:
        msgs, tokens = tool_session(6)
        fake = FakeSummarizer(merge_fails=True)
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=1000,
            context_window=10_000,
            tokens=tokens,
        )
        assert out.partial
        assert "\n\n---\n\n" in out.summary
        assert len(fake.merges) == 2  # max_attempts=2, then gave up

    def test_failure_everywhere_is_one_error_with_bounded_calls(self) -> None:
        msgs, tokens = tool_session(6)
        fake = FakeSummarizer(always_fail=True, status=500)
        with pytest.raises(SummarizerError) as info:
            summarize_in_stages(
                msgs,
                fake,
                CharsEstimator(),
                max_chunk_tokens=1000,
                context_window=1000,
                tokens=tokens,
                max_attempts=2,
            )
        assert "could not summarize 24 messages" in str(info.value)
        assert info.value.status_code == 500
        # per part: full try (first chunk fails, 2 attempts) + partial try (2 attempts)
        assert len(fake.calls) <= 2 * 2 * 2

    def test_auth_error_stops_at_once(self) -> None:
        msgs, tokens = tool_session(3)
        fake = FakeSummarizer(always_fail=True, status=401)
        with pytest.raises(SummarizerError) as info:
            summarize_in_stages(
                msgs,
                fake,
                CharsEstimator(),
                max_chunk_tokens=100,
                context_window=1000,
                tokens=tokens,
            )
        assert info.value.status_code == 401 and len(fake.calls) == 1

    def test_empty_input_keeps_previous_summary(self) -> None:
        out = summarize_in_stages(
            [],
            FakeSummarizer(),
            CharsEstimator(),
            max_chunk_tokens=10,
            context_window=100,
            previous_summary="P",
        )
        assert out == StagedSummary(summary="P")

    def test_token_list_length_is_checked(self) -> None:
        with pytest.raises(SummarizerError, match="token counts"):
            summarize_in_stages(
                [{"role": "user"}],
                FakeSummarizer(),
                CharsEstimator(),
                max_chunk_tokens=10,
                context_window=100,
                tokens=[],
            )

    def test_extractive_through_stages_keeps_everything(self) -> None:
        out = summarize_in_stages(
            conversation() * 3,
            ExtractiveSummarizer(),
            CharsEstimator(),
            max_chunk_tokens=60,
            context_window=1000,
        )
        assert out.stages > 2 and not out.partial
        assert "Refactor the auth module to use JWT." in out.summary

    def test_format_tokens_k(self) -> None:
        assert [format_tokens_k(t) for t in (850, 1000, 1500, 15_000, 15_499)] == [
            "850",
            "1K",
            "1.5K",
            "15K",
            "15K",
        ]

    def test_group_units_attach_results_to_call(self) -> None:
        msgs, _ = tool_session(2)
        assert group_units(msgs) == [[0], [1, 2, 3], [4], [5, 6, 7]]


@st.composite
def tool_sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for t in range(draw(st.integers(1, 8))):
        msgs.append(sized("user", draw(st.integers(0, 400))))
        for k in range(draw(st.integers(0, 3))):
            ids = [f"{t}.{k}.{r}" for r in range(draw(st.integers(1, 3)))]
            calls = [{"type": "toolCall", "id": i, "name": "bash", "arguments": {}} for i in ids]
            msgs.append(sized("assistant", draw(st.integers(0, 200)), content=calls))
            for i in ids:
                msgs.append(sized("toolResult", draw(st.integers(0, 900)), toolCallId=i))
    return msgs


class TestStagedProperties:
    @settings(max_examples=200, deadline=None)
    @given(tool_sessions(), st.integers(50, 2000), st.integers(1, 4))
    def test_every_call_keeps_tool_pairs_and_covers_all_messages(
        self, msgs: list[dict[str, Any]], max_chunk: int, parts: int
    ) -> None:
        fake = FakeSummarizer()
        out = summarize_in_stages(
            msgs,
            fake,
            CharsEstimator(),
            max_chunk_tokens=max_chunk,
            context_window=100_000,
            parts=parts,
            tokens=[m["size"] for m in msgs],
        )
        assert_calls_keep_tool_pairs(fake.calls)
        sent = [m for chunk, _ in fake.calls for m in chunk]
        assert sent == msgs  # every message exactly once, in order
        assert not out.partial
        assert len(fake.merges) <= 1


def test_import_and_construction_touch_no_network() -> None:
    import pathlib
    import subprocess
    import sys

    code = """
import socket
def refuse(*a, **k):
    raise AssertionError("network touched")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
import nexus_store.compaction.plan, nexus_store.compaction.policy, nexus_store.compaction.prune
from nexus_store.compaction.summarizer import HttpSummarizer, get_summarizer
HttpSummarizer("https://openrouter.ai/api/v1", "m", api_key="k").close()
assert get_summarizer("extractive").summarize([{"role": "user", "content": "hi there"}])
"""
    root = pathlib.Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
