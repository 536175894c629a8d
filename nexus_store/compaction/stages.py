"""Staged summarization: summarize a span too big for one request, and degrade gracefully.

The span is first grouped into *units* — a message plus the tool results that
follow it — so that no split ever separates a tool call from its results. Then,
as OpenClaw's ``summarizeInStages`` does (seed 000):

1. the units are split into ``parts`` stretches of about equal token share;
2. each part is summarized chunk by chunk (chunks of at most ``max_chunk_tokens``),
   the summary so far fed forward into the next call (a rolling summary); the first
   call updates ``previous_summary``;
3. if that fails, the part is retried without its oversized messages (more than
   half the context window), each left out with a note such as
   ``[Large toolResult (~15K tokens) omitted from summary]``;
4. if that fails too, the part becomes a plain note ("Context contained 12
   messages (3 oversized). Summary unavailable due to size limits."), and the
   result is marked partial;
5. partial summaries of several parts are merged by the summarizer (or, if the
   merge fails, joined in order, marked partial).

Every summarizer call is attempted at most ``max_attempts`` times, so the total
number of calls is bounded. An authentication or not-found error (401/403/404)
cannot be cured by smaller input and is raised at once; when no call succeeded at
all, one `SummarizerError` says so — a note alone is never returned as a summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.compaction.summarizer import DEFAULT_MAX_TOKENS, Summarizer
from nexus_store.errors import SummarizerError
from nexus_store.tokens import TokenCounter, message_tokens

__all__ = [
    "StagedSummary",
    "chunk_units",
    "format_tokens_k",
    "group_units",
    "split_by_token_share",
    "summarize_in_stages",
]

OVERSIZED_SHARE = 0.5
"""A message above this share of the context window is left out in fallback 1."""

_FATAL_STATUS = frozenset({401, 403, 404})

Message = Mapping[str, Any]


class StagedSummary(BaseModel):
    """The result of `summarize_in_stages`.

    Attributes:
        summary: The final summary text.
        partial: True when some messages were left out or a part could not be summarized.
        omitted: Notes of what was left out, in order (also appended to the summary).
        stages: Summarizer calls that produced text (chunks, plus the merge if any).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    summary: str
    partial: bool = False
    omitted: list[str] = []
    stages: int = 0


def format_tokens_k(tokens: int) -> str:
    """Format a token count as ``15K`` (or ``1.5K`` under 10K, ``850`` under 1K)."""
    if tokens >= 10_000:
        return f"{round(tokens / 1000)}K"
    if tokens >= 1000:
        return f"{tokens / 1000:.1f}K".replace(".0K", "K")
    return str(tokens)


def group_units(messages: Sequence[Message]) -> list[list[int]]:
    """Group message indices so that tool results stay with the message before them.

    A ``toolResult`` never starts a unit: it joins the unit of the assistant message
    that made the call (or of whatever precedes it), so every split of units keeps
    a tool call and its results together.

    Args:
        messages: Agent messages in order.

    Returns:
        Lists of consecutive indices covering ``range(len(messages))``.
    """
    units: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") == "toolResult" and units:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def split_by_token_share(
    units: Sequence[list[int]], tokens: Sequence[int], parts: int
) -> list[list[list[int]]]:
    """Split units into at most ``parts`` consecutive groups of about equal tokens.

    Args:
        units: Output of `group_units`.
        tokens: Token count of each message.
        parts: Number of groups wanted (>= 1).

    Returns:
        Non-empty groups of units, in order.
    """
    parts = max(1, min(parts, len(units)))
    if parts <= 1:
        return [list(units)] if units else []
    total = sum(tokens[i] for unit in units for i in unit)
    target = total / parts
    groups: list[list[list[int]]] = [[]]
    acc = 0
    for unit in units:
        size = sum(tokens[i] for i in unit)
        if groups[-1] and len(groups) < parts and acc + size > target * len(groups):
            groups.append([])
        groups[-1].append(unit)
        acc += size
    return [g for g in groups if g]


def chunk_units(
    units: Sequence[list[int]], tokens: Sequence[int], max_chunk_tokens: int
) -> list[list[int]]:
    """Pack units into chunks of at most ``max_chunk_tokens`` (an oversized unit stands alone).

    Args:
        units: Output of `group_units` (or a part of it).
        tokens: Token count of each message.
        max_chunk_tokens: Budget of one chunk.

    Returns:
        Lists of message indices, in order.
    """
    chunks: list[list[int]] = []
    current: list[int] = []
    current_tokens = 0
    for unit in units:
        size = sum(tokens[i] for i in unit)
        if current and current_tokens + size > max_chunk_tokens:
            chunks.append(current)
            current, current_tokens = [], 0
        current.extend(unit)
        current_tokens += size
    if current:
        chunks.append(current)
    return chunks


class _Run:
    """State of one staged run: the call budget, counters and the last error."""

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        instructions: str | None,
        max_attempts: int,
        max_tokens: int,
    ) -> None:
        self.summarizer = summarizer
        self.instructions = instructions
        self.max_attempts = max(1, max_attempts)
        self.max_tokens = max_tokens
        self.stages = 0
        self.last_error: SummarizerError | None = None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> str:
        error: SummarizerError | None = None
        for _ in range(self.max_attempts):
            try:
                text = fn(*args, **kwargs)
            except SummarizerError as err:
                error = err
                if err.status_code in _FATAL_STATUS:
                    break
                continue
            if isinstance(text, str) and text.strip():
                self.stages += 1
                return text.strip()
            error = SummarizerError("the summarizer returned an empty summary")
        assert error is not None
        self.last_error = error
        if error.status_code in _FATAL_STATUS:
            # Smaller input cannot fix a bad key or a wrong model: stop now.
            raise error
        raise _Failed(str(error))

    def summarize(self, messages: list[Message], previous: str | None) -> str:
        return self._call(
            self.summarizer.summarize,
            messages,
            previous_summary=previous,
            instructions=self.instructions,
            max_tokens=self.max_tokens,
        )

    def merge(self, summaries: list[str]) -> str:
        return self._call(self.summarizer.merge, summaries, instructions=self.instructions)


class _Failed(Exception):
    """Internal: a stage could not be summarized after its attempts."""


def _roll(
    run: _Run,
    messages: Sequence[Message],
    tokens: Sequence[int],
    indices: list[int],
    max_chunk_tokens: int,
    previous: str | None,
) -> str | None:
    """Summarize ``indices`` chunk by chunk with a rolling summary."""
    chosen = [messages[i] for i in indices]
    sub_tokens = [tokens[i] for i in indices]
    rolling = previous
    for chunk in chunk_units(group_units(chosen), sub_tokens, max_chunk_tokens):
        rolling = run.summarize([chosen[i] for i in chunk], rolling)
    return rolling


def _summarize_part(
    run: _Run,
    messages: Sequence[Message],
    tokens: Sequence[int],
    indices: list[int],
    *,
    max_chunk_tokens: int,
    context_window: int,
    previous: str | None,
) -> tuple[str | None, list[str], bool]:
    """One part through the three tiers. Returns (summary or None, notes, summarized?)."""
    try:
        return _roll(run, messages, tokens, indices, max_chunk_tokens, previous), [], True
    except _Failed:
        pass
    limit = context_window * OVERSIZED_SHARE
    small = [i for i in indices if tokens[i] <= limit]
    notes = [
        f"[Large {messages[i].get('role', 'message')} (~{format_tokens_k(tokens[i])} tokens) "
        "omitted from summary]"
        for i in indices
        if tokens[i] > limit
    ]
    if small and notes:
        try:
            summary = _roll(run, messages, tokens, small, max_chunk_tokens, previous)
            return summary, notes, True
        except _Failed:
            pass
    note = (
        f"Context contained {len(indices)} messages ({len(notes)} oversized). "
        "Summary unavailable due to size limits."
    )
    return previous, [note], False


def summarize_in_stages(
    messages: Sequence[Message],
    summarizer: Summarizer,
    counter: TokenCounter,
    *,
    max_chunk_tokens: int,
    context_window: int,
    previous_summary: str | None = None,
    instructions: str | None = None,
    parts: int = 2,
    min_messages_for_split: int = 4,
    max_attempts: int = 2,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokens: Sequence[int] | None = None,
) -> StagedSummary:
    """Summarize ``messages`` in stages, with fallbacks, into one summary.

    Args:
        messages: Agent messages to summarize, in order.
        summarizer: Any `Summarizer`.
        counter: Counts message tokens when ``tokens`` is not given.
        max_chunk_tokens: Token budget of one summarizer call's messages.
        context_window: The summarizing model's window; messages above half of it
            are left out in fallback 1.
        previous_summary: The summary being updated (fed into the first call).
        instructions: Extra focus passed to every call.
        parts: Stretches to split a large span into before merging (1 = no split).
        min_messages_for_split: Spans with fewer messages are never split.
        max_attempts: Attempts per summarizer call (>= 1).
        max_tokens: Output budget of each summary.
        tokens: Precomputed token count per message (as stored), same length.

    Returns:
        A `StagedSummary`.

    Raises:
        SummarizerError: On 401/403/404 at once, or when no summarizer call succeeded
            (the message names the last cause), or if ``tokens`` has the wrong length.
    """
    if tokens is None:
        tokens = [message_tokens(counter, m) for m in messages]
    elif len(tokens) != len(messages):
        raise SummarizerError(
            f"got {len(tokens)} token counts for {len(messages)} messages; pass one per message"
        )
    if max_chunk_tokens <= 0 or context_window <= 0:
        raise SummarizerError(
            "max_chunk_tokens and context_window must be positive "
            f"(got {max_chunk_tokens} and {context_window})"
        )
    if not messages:
        return StagedSummary(summary=previous_summary or "No prior history.")
    run = _Run(
        summarizer, instructions=instructions, max_attempts=max_attempts, max_tokens=max_tokens
    )
    units = group_units(messages)
    total = sum(tokens)
    split = parts > 1 and len(messages) >= min_messages_for_split and total > max_chunk_tokens
    groups = split_by_token_share(units, tokens, parts) if split else [list(units)]

    summaries: list[str] = []
    omitted: list[str] = []
    partial = False
    any_summarized = False
    rolling = previous_summary
    for group in groups:
        indices = [i for unit in group for i in unit]
        summary, notes, ok = _summarize_part(
            run,
            messages,
            tokens,
            indices,
            max_chunk_tokens=max_chunk_tokens,
            context_window=context_window,
            previous=rolling,
        )
        any_summarized = any_summarized or ok
        partial = partial or bool(notes) or not ok
        omitted.extend(notes)
        if summary is not None and (ok or not summaries):
            summaries.append(summary)
        rolling = summary
    if not any_summarized:
        cause = run.last_error or SummarizerError("no summary produced")
        raise SummarizerError(
            f"could not summarize {len(messages)} messages ({total} tokens) in "
            f"{len(groups)} part(s), even leaving out oversized messages: {cause}",
            status_code=cause.status_code,
        )

    summaries = [s for i, s in enumerate(summaries) if s not in summaries[:i]]
    if len(summaries) > 1:
        try:
            final = run.merge(summaries)
        except _Failed:
            partial = True
            final = "\n\n---\n\n".join(summaries)
    else:
        final = summaries[0] if summaries else (previous_summary or "")
    if omitted:
        final = final + "\n\n" + "\n".join(omitted)
    return StagedSummary(summary=final.strip(), partial=partial, omitted=omitted, stages=run.stages)
