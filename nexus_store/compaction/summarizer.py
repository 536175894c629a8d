"""Summarizers: turn a span of agent messages into a structured checkpoint summary.

A `Summarizer` has two methods: `summarize` (messages, optionally updating an
earlier summary) and `merge` (several partial summaries into one). Two ship:

* `HttpSummarizer` talks to any OpenAI-compatible ``/chat/completions`` endpoint
  (OpenRouter, OpenAI, Ollama, vLLM, llama.cpp server) over an injected or owned
  `httpx.Client`, with explicit timeouts and bounded retries.
* `ExtractiveSummarizer` (in `nexus_store.compaction.extractive`) needs no network and no
  model: it fills the same sections from the messages themselves.

Every failure is a `SummarizerError` carrying the HTTP status when there was one.
The API key is held privately and scrubbed from every message this module builds,
so it never reaches a repr, a log line or an exception. Nothing here opens a
connection at import.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nexus_store.compaction.extractive import ExtractiveSummarizer
from nexus_store.compaction.prompts import (
    DEFAULT_MAX_TOKENS,
    MERGE_PROMPT,
    SUMMARY_PROMPT,
    SYSTEM_PROMPT,
    UPDATE_PROMPT,
    build_merge_prompt,
    build_summary_prompt,
)
from nexus_store.errors import SummarizerError

if TYPE_CHECKING:  # httpx is imported when a summarizer is built (it is slow to import)
    import httpx

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MERGE_PROMPT",
    "SUMMARY_PROMPT",
    "SYSTEM_PROMPT",
    "UPDATE_PROMPT",
    "HttpSummarizer",
    "Summarizer",
    "build_merge_prompt",
    "build_summary_prompt",
    "get_summarizer",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can summarize agent messages and merge partial summaries."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """Summarize ``messages``, updating ``previous_summary`` when given.

        Raises:
            SummarizerError: If no summary could be produced.
        """
        ...

    def merge(self, summaries: Sequence[str], *, instructions: str | None = None) -> str:
        """Merge partial summaries (oldest first) into one.

        Raises:
            SummarizerError: If no summary could be produced.
        """
        ...


# -- the HTTP client ---------------------------------------------------------------

_KEY_ENV = ("NEXUS_SUMMARIZER_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")
_OPENROUTER_URL = "https://openrouter.ai/api/v1"
_OPENAI_URL = "https://api.openai.com/v1"
_RETRY_STATUS = frozenset({408, 409, 425, 429})


def _resolve_key(api_key: str | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """Return (key, env var it came from)."""
    if api_key:
        return api_key, None
    for name in _KEY_ENV:
        value = env.get(name)
        if value:
            return value, name
    return None, None


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class _Secret:
    """Holds the API key; its repr and str never show it (not even in ``vars()``)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


class _Retry(Exception):
    """Internal: one attempt failed in a way worth retrying."""

    def __init__(self, message: str, status_code: int | None, delay: float | None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.delay = delay


class HttpSummarizer:
    """A summarizer over an OpenAI-compatible ``POST {base_url}/chat/completions``.

    Connection settings come from the arguments, then the environment:
    ``NEXUS_SUMMARIZER_BASE_URL``, ``NEXUS_SUMMARIZER_MODEL`` and the key from
    ``NEXUS_SUMMARIZER_API_KEY``, ``OPENROUTER_API_KEY`` or ``OPENAI_API_KEY``. With
    no base URL, OpenRouter is used when its key is what was found, else OpenAI. A
    key is optional (local Ollama, vLLM and llama.cpp servers need none).

    Requests that fail with 408/409/425/429, a 5xx status, a connection error or a
    connect timeout are retried up to ``max_retries`` times, waiting
    ``backoff * 2**attempt`` seconds plus up to 25% jitter, capped at
    ``max_backoff``; a ``Retry-After`` header replaces the computed wait (also
    capped). A read timeout (the server stalled) is not retried: the stall would
    just repeat. Other 4xx statuses, malformed JSON and a response without
    ``choices[0].message.content`` fail at once.

    Example:
        >>> s = HttpSummarizer("http://127.0.0.1:11434/v1", "llama3.2", api_key="sk-123")
        >>> repr(s)
        "HttpSummarizer(base_url='http://127.0.0.1:11434/v1', model='llama3.2', api_key='***')"
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        client: httpx.Client | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        temperature: float | None = 0.2,
        extra_headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        """Create a client; nothing is sent until the first summary.

        Args:
            base_url: API root ending before ``/chat/completions``, e.g.
                ``https://openrouter.ai/api/v1`` or ``http://127.0.0.1:11434/v1``.
            model: Model id as the endpoint names it.
            api_key: Bearer token; never shown in any repr, message or log.
            client: An `httpx.Client` to use (its transport, proxies, etc.); it is
                not closed by `close`. Without one, a client is created and owned.
            timeout: Seconds to wait for a response (read/write/pool).
            connect_timeout: Seconds to wait for a connection.
            max_retries: Retries after the first attempt (0 = no retry).
            backoff: First backoff delay in seconds; doubled at each retry.
            max_backoff: Upper bound on any single wait, Retry-After included.
            temperature: Sampling temperature, or None to let the server decide.
            extra_headers: Added to each request (e.g. OpenRouter's ``X-Title``).
            env: Environment to read settings from (default ``os.environ``).
            sleep: Called to wait between retries (injectable for tests).
            rng: Source of jitter (injectable for tests).

        Raises:
            SummarizerError: If no model is given or configured, the base URL is not
                http(s), or a setting is invalid.
        """
        environ: Mapping[str, str] = os.environ if env is None else env
        key, key_source = _resolve_key(api_key, environ)
        url = base_url or environ.get("NEXUS_SUMMARIZER_BASE_URL") or None
        if url is None:
            url = _OPENROUTER_URL if key_source == "OPENROUTER_API_KEY" else _OPENAI_URL
        if not url.startswith(("http://", "https://")):
            raise SummarizerError(
                f"summarizer base URL {url!r} must start with http:// or https://, "
                "e.g. http://127.0.0.1:11434/v1"
            )
        model_id = model or environ.get("NEXUS_SUMMARIZER_MODEL") or None
        if not model_id:
            raise SummarizerError(
                "no summarizer model given; pass model=... (--model) or set "
                "NEXUS_SUMMARIZER_MODEL, e.g. 'openai/gpt-4o-mini' or 'llama3.2'"
            )
        if max_retries < 0 or timeout <= 0 or connect_timeout <= 0 or backoff < 0:
            raise SummarizerError(
                "invalid summarizer settings: max_retries, backoff must be >= 0 and "
                f"timeouts > 0 (got max_retries={max_retries}, backoff={backoff}, "
                f"timeout={timeout}, connect_timeout={connect_timeout})"
            )
        # Credentials in the URL (http://user:pw@host/v1) are sent, never shown: the
        # public base_url is the URL without them (issue 18).
        self.base_url, userinfo, password = _split_credentials(url.rstrip("/"))
        self.__url = _Secret(url.rstrip("/"))
        self.model = model_id
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.temperature = temperature
        import httpx

        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.__api_key = _Secret(key) if key else None
        # what _scrub masks, longest first (a key, the URL's user:password and password)
        secrets = [x for x in (key, userinfo, password) if x]
        self.__secrets = [_Secret(x) for x in sorted(set(secrets), key=len, reverse=True)]
        self._extra_headers = dict(extra_headers or {})
        self._client = client
        self._owns_client = client is None
        self._sleep = sleep
        self._rng = rng or random.Random()

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL."""
        return f"{self.base_url}/chat/completions"

    @property
    def has_api_key(self) -> bool:
        """Whether a key will be sent (the key itself is never exposed)."""
        return bool(self.__api_key)

    def __repr__(self) -> str:
        key = "'***'" if self.__api_key else "None"
        return f"HttpSummarizer(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    def close(self) -> None:
        """Close the HTTP client if this summarizer created it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> HttpSummarizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Summarizer protocol ------------------------------------------------

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """Ask the model for a checkpoint summary of ``messages``.

        Args:
            messages: Agent messages to summarize, in order.
            previous_summary: An earlier summary to update rather than replace.
            instructions: Extra focus from the user (``--focus``).
            max_tokens: Output budget of the summary.

        Returns:
            The summary text.

        Raises:
            SummarizerError: On any HTTP, timeout or response-shape failure.
        """
        prompt = build_summary_prompt(
            messages, previous_summary=previous_summary, instructions=instructions
        )
        return self.complete(prompt, max_tokens=max_tokens)

    def merge(
        self,
        summaries: Sequence[str],
        *,
        instructions: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """Ask the model to merge partial summaries into one.

        Args:
            summaries: Partial summaries, oldest first.
            instructions: Extra focus from the user.
            max_tokens: Output budget of the merged summary.

        Returns:
            The merged summary.

        Raises:
            SummarizerError: On any HTTP, timeout or response-shape failure.
        """
        if len(summaries) == 1:
            return summaries[0]
        return self.complete(
            build_merge_prompt(summaries, instructions=instructions), max_tokens=max_tokens
        )

    # -- the HTTP exchange ------------------------------------------------------

    def complete(self, prompt: str, *, max_tokens: int = DEFAULT_MAX_TOKENS) -> str:
        """Send one chat completion (system prompt + ``prompt``) with retries.

        Args:
            prompt: The user message.
            max_tokens: Output budget.

        Returns:
            The assistant's text.

        Raises:
            SummarizerError: When the request fails for good.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt},
            ],
            "max_tokens": max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        attempts = self.max_retries + 1
        last: _Retry | None = None
        for attempt in range(attempts):
            if attempt:
                assert last is not None
                delay = self._delay(attempt - 1, last.delay)
                log.warning(
                    "summarizer attempt %d/%d failed (%s); retrying in %.2fs",
                    attempt,
                    attempts,
                    last.message,
                    delay,
                )
                self._sleep(delay)
            try:
                return self._attempt(body)
            except _Retry as retry:
                last = retry
        assert last is not None
        raise SummarizerError(
            f"summarizer request to {self.endpoint} failed after {attempts} attempts: "
            f"{last.message}",
            status_code=last.status_code,
        )

    def _delay(self, retry_index: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        base = self.backoff * (2.0**retry_index)
        return min(base + base * 0.25 * self._rng.random(), self.max_backoff)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self._extra_headers)
        if self.__api_key:
            headers["Authorization"] = f"Bearer {self.__api_key.get()}"
        return headers

    def _scrub(self, text: str) -> str:
        """``text`` with every secret masked; call it before any truncation (issue 18)."""
        for secret in self.__secrets:
            text = text.replace(secret.get(), "***")
        return text

    def _holds_secret(self, text: str) -> bool:
        return any(secret.get() in text for secret in self.__secrets)

    def _attempt(self, body: dict[str, Any]) -> str:
        """One request. Returns text, raises `_Retry`, or raises `SummarizerError`."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        # Errors are built outside the `except` blocks so that no httpx exception
        # (whose request carries the Authorization header) is chained to ours.
        failure: str | None = None
        retry = False
        try:
            response = self._client.post(
                f"{self.__url.get()}/chat/completions",
                json=body,
                headers=self._headers(),
                timeout=self.timeout,
            )
        except httpx.ConnectTimeout:
            failure, retry = f"connect timeout after {self.timeout.connect}s", True
        except httpx.TimeoutException:
            failure = (
                f"no response within {self.timeout.read}s (timeout); the server stalled — "
                "raise the timeout or check the server"
            )
        except httpx.TransportError as err:
            failure, retry = f"connection error: {type(err).__name__}: {err}", True
        if failure is not None:
            message = self._scrub(failure)
            if retry:
                raise _Retry(message, None, None)
            raise SummarizerError(
                f"summarizer request to {self.endpoint} failed: {message}", status_code=None
            )
        return self._read(response)

    def _read(self, response: httpx.Response) -> str:
        status = response.status_code
        if status >= 400:
            detail = _error_detail(response, self._scrub)
            if status in _RETRY_STATUS or status >= 500:
                retry_after = _parse_retry_after(response.headers.get("Retry-After"))
                raise _Retry(f"HTTP {status}: {detail}", status, retry_after)
            hint = {
                401: "check the API key (NEXUS_SUMMARIZER_API_KEY)",
                403: "the key is not allowed to use this model",
                404: "check the base URL and the model name",
            }.get(status, "check the request settings")
            raise SummarizerError(
                f"summarizer at {self.endpoint} answered HTTP {status}: {detail}; {hint}",
                status_code=status,
            )
        payload: Any = None
        malformed = False
        try:
            payload = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            malformed = True
        if malformed:
            snippet = self._scrub(response.text)[:200]
            raise SummarizerError(
                f"summarizer at {self.endpoint} returned malformed JSON (HTTP {status}): "
                f"{snippet!r}",
                status_code=status,
            )
        text = _choice_text(payload)
        if text is None:
            shape = self._scrub(json.dumps(payload))[:200]
            raise SummarizerError(
                f"summarizer at {self.endpoint} returned no choices[0].message.content "
                f"(HTTP {status}): {shape}",
                status_code=status,
            )
        if not text.strip():
            raise SummarizerError(
                f"summarizer at {self.endpoint} returned an empty summary (HTTP {status})",
                status_code=status,
            )
        if self._holds_secret(text):
            # A summary that echoes the key (a server or a prompt injection repeating the
            # request) would be stored in turns.summary: masked, and said so (issue 18).
            log.warning("the summarizer's reply contained the API key; it was masked")
            text = self._scrub(text)
        return text.strip()


def _split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without user:password@, the user:password part, the password)``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, host = parts.netloc.rpartition("@")
    password = userinfo.partition(":")[2] or None
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return clean, userinfo, password


def _error_detail(response: httpx.Response, scrub: Callable[[str], str]) -> str:
    """A short, readable reason from an error response body, secrets masked first.

    (Masking after cutting the text would leave the start of a key that straddles
    the cut: issue 18.)
    """
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return scrub(response.text)[:200].strip() or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return scrub(str(error["message"]))[:300]
        if isinstance(error, str):
            return scrub(error)[:300]
        if isinstance(payload.get("message"), str):
            return scrub(str(payload["message"]))[:300]
    return scrub(json.dumps(payload))[:200]


def _choice_text(payload: Any) -> str | None:
    """``choices[0].message.content`` as text (a list of text parts is joined)."""
    if not isinstance(payload, dict):
        return None
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "".join(texts) if texts else None
    return None


def get_summarizer(kind: str = "extractive", **opts: Any) -> Summarizer:
    """Build a summarizer by kind.

    Args:
        kind: ``"extractive"`` (offline, deterministic) or ``"openai"`` (any
            OpenAI-compatible endpoint; ``"http"`` is an alias).
        **opts: Keyword arguments for the class (`HttpSummarizer`'s ``base_url``,
            ``model``, ``api_key``, ``timeout``, ... ; none for extractive).

    Returns:
        A `Summarizer`.

    Raises:
        SummarizerError: For an unknown kind or invalid options.
    """
    if kind == "extractive":
        if opts:
            raise SummarizerError(
                f"the extractive summarizer takes no options (got {', '.join(sorted(opts))})"
            )
        return ExtractiveSummarizer()
    if kind in ("openai", "http"):
        try:
            return HttpSummarizer(**opts)
        except TypeError as err:
            raise SummarizerError(f"invalid options for the openai summarizer: {err}") from None
    raise SummarizerError(f"unknown summarizer {kind!r}; choose 'extractive' or 'openai'")
