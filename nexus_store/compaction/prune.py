"""Pruning (phase 1 of seed 000): old tool outputs hidden behind a placeholder, as a view.

`prune_context` takes an assembled context (agent messages and their stored token
counts) and returns a new list in which old ``toolResult`` contents read
``[output pruned for context]``. Nothing is written: the turns in the database keep
their full output, and the view is recomputed at every assembly.

Walking backwards from the newest message, OpenClaw's rules apply in this order:

1. tool results inside the last ``protect_user_turns`` (2) user turns are kept;
2. the walk stops at the latest ``compactionSummary`` (nothing before it is in view);
3. outputs of protected tools (``skill``, ``memory_search``, ``gandiva_recall`` and
   any configured — the configured list adds to the built-ins, never replaces them)
   are kept;
4. the most recent ``protect_tokens`` (40K) of tool output are kept; an output that
   crosses that line, and every older one, is a candidate;
5. candidates are pruned only if that saves at least ``minimum_tokens`` (20K);
   otherwise the context is returned unchanged.

Inputs are never mutated; a pruned message is a new dict with the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nexus_store.errors import NexusError
from nexus_store.tokens import CharsEstimator, TokenCounter, message_tokens

__all__ = [
    "BUILTIN_PROTECTED_TOOLS",
    "PRUNED_PLACEHOLDER",
    "PruneConfig",
    "PruneResult",
    "prune_context",
    "pruned_message",
    "tool_output_tokens",
]

PRUNED_PLACEHOLDER = "[output pruned for context]"
"""What a pruned tool result's content becomes."""

BUILTIN_PROTECTED_TOOLS = frozenset({"skill", "memory_search", "gandiva_recall"})
"""Tools whose output is never pruned, whatever the configuration."""


class PruneConfig(BaseModel):
    """Settings of the prune view (``[compaction.prune]`` in the config file).

    Attributes:
        enabled: False turns pruning off entirely.
        protect_tokens: Tokens of the most recent tool output that are never pruned.
        minimum_tokens: Prune only when at least this many tokens would be saved.
        protected_tools: Tool names added to `BUILTIN_PROTECTED_TOOLS`.
        protect_user_turns: Most recent user turns whose tool results are never pruned.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    enabled: bool = True
    protect_tokens: int = Field(default=40_000, ge=0)
    minimum_tokens: int = Field(default=20_000, ge=0)
    protected_tools: tuple[str, ...] = ()
    protect_user_turns: int = Field(default=2, ge=0)

    @property
    def all_protected_tools(self) -> frozenset[str]:
        """The built-in protected tools plus the configured ones."""
        return BUILTIN_PROTECTED_TOOLS | frozenset(self.protected_tools)


class PruneResult(BaseModel):
    """A pruned view of a context.

    Attributes:
        messages: The context with pruned tool results replaced (others are the input objects).
        tokens: Token count of each message of ``messages``.
        pruned: Indices of the pruned messages, ascending.
        tokens_before: Sum of the input token counts.
        tokens_saved: ``tokens_before - tokens_after`` (0 when nothing was pruned).
        tokens_after: Sum of ``tokens``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    messages: list[dict[str, Any]]
    tokens: list[int]
    pruned: list[int]
    tokens_before: int
    tokens_saved: int
    tokens_after: int


def tool_output_tokens(messages: Sequence[Mapping[str, Any]], tokens: Sequence[int]) -> int:
    """Sum the tokens of the ``toolResult`` messages of a context (for layer selection).

    Args:
        messages: Agent messages.
        tokens: Token count of each message.

    Returns:
        The total tokens of tool output.
    """
    return sum(t for m, t in zip(messages, tokens, strict=True) if m.get("role") == "toolResult")


def _is_placeholder(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        return content[0].get("type") == "text" and content[0].get("text") == PRUNED_PLACEHOLDER
    return content == PRUNED_PLACEHOLDER


def _pruned_copy(message: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(message)
    copy["content"] = [{"type": "text", "text": PRUNED_PLACEHOLDER}]
    return copy


def pruned_message(
    message: Mapping[str, Any], counter: TokenCounter | None = None
) -> tuple[dict[str, Any], int]:
    """A tool result with its content replaced by the placeholder, and its token count.

    Args:
        message: A ``toolResult`` message (not mutated).
        counter: Counts the placeholder's tokens (default: pi's chars/4 estimate).

    Returns:
        ``(copy, tokens)``.
    """
    copy = _pruned_copy(message)
    return copy, message_tokens(counter or CharsEstimator(), copy)


def prune_context(
    messages: Sequence[Mapping[str, Any]],
    tokens: Sequence[int],
    config: PruneConfig | None = None,
    *,
    counter: TokenCounter | None = None,
) -> PruneResult:
    """Return the context with old tool outputs replaced by a placeholder.

    Args:
        messages: The assembled context, oldest first (agent message dicts).
        tokens: Stored token count of each message, same length.
        config: Prune settings (defaults: protect 40K, minimum 20K, 2 user turns).
        counter: Counts the placeholder's tokens (default: pi's chars/4 estimate).

    Returns:
        A `PruneResult`; when nothing qualifies its messages are the input messages.

    Raises:
        NexusError: If ``tokens`` does not have one count per message.

    Example:
        >>> def result(i):
        ...     return {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
        ...             "content": [{"type": "text", "text": "x" * 4000}]}
        >>> messages = [{"role": "user", "content": "go"}]
        >>> for i in range(3):
        ...     call = {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {}}
        ...     messages += [{"role": "assistant", "content": [call]}, result(i)]
        >>> messages += [{"role": "user", "content": "next"}, {"role": "user", "content": "again"}]
        >>> tokens = [1, 10, 1000, 10, 1000, 10, 1000, 1, 1]
        >>> config = PruneConfig(protect_tokens=1000, minimum_tokens=500)
        >>> view = prune_context(messages, tokens, config)
        >>> view.pruned, view.messages[2]["content"][0]["text"]
        ([2, 4], '[output pruned for context]')
        >>> messages[2]["content"][0]["text"] == "x" * 4000  # a view: the input is untouched
        True
    """
    cfg = config or PruneConfig()
    if len(tokens) != len(messages):
        raise NexusError(
            f"prune_context got {len(tokens)} token counts for {len(messages)} messages; "
            "pass one count per message"
        )
    before = sum(tokens)
    # model_construct: the values are built here, and validating would copy every dict.
    unchanged = PruneResult.model_construct(
        messages=[m if isinstance(m, dict) else dict(m) for m in messages],
        tokens=list(tokens),
        pruned=[],
        tokens_before=before,
        tokens_saved=0,
        tokens_after=before,
    )
    if not cfg.enabled:
        return unchanged
    protected_tools = cfg.all_protected_tools
    counter = counter or CharsEstimator()

    candidates: list[int] = []
    user_turns = 0
    seen_output = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        role = message.get("role")
        if role == "compactionSummary":
            break  # nothing older than the latest summary boundary is looked at
        if role == "user":
            user_turns += 1
            continue
        if user_turns < cfg.protect_user_turns:
            continue
        if role != "toolResult" or message.get("toolName") in protected_tools:
            continue
        if _is_placeholder(message):
            continue
        seen_output += tokens[index]
        if seen_output > cfg.protect_tokens:
            candidates.append(index)

    if not candidates:
        return unchanged
    new_messages = list(unchanged.messages)
    new_tokens = list(tokens)
    saved = 0
    # every candidate is a toolResult, whose count is its content's: one placeholder cost
    cost = message_tokens(counter, _pruned_copy({"role": "toolResult"}))
    for index in candidates:
        copy = _pruned_copy(messages[index])
        if cost >= tokens[index]:
            continue  # already smaller than the placeholder: nothing to gain
        new_messages[index] = copy
        new_tokens[index] = cost
        saved += tokens[index] - cost
    if saved < cfg.minimum_tokens or saved == 0:
        return unchanged
    pruned = sorted(i for i in candidates if new_messages[i] is not unchanged.messages[i])
    after = sum(new_tokens)
    return PruneResult.model_construct(
        messages=new_messages,
        tokens=new_tokens,
        pruned=pruned,
        tokens_before=before,
        tokens_saved=before - after,
        tokens_after=after,
    )
