"""Pure planning and running of a compaction over a leaf's current context (no SQL).

The input is the context the store assembled for a leaf, one `ContextItem` per
message: its turn id, turn kind, the agent message and its stored token count.
That context already starts at the previous compaction's first kept turn, after
the previous summary — so the turns kept by one compaction are summarized by the
next (pi issue #2608 lost them by starting after the previous compaction turn).

`plan_compaction` chooses the cut, as pi's ``findCutPoint`` does: walking back from
the newest message until ``keep_recent_tokens`` are reached, then cutting at the
nearest valid point at or after that message — the first message of a turn whose
role is not ``toolResult`` — so a tool call is never separated from its results.
When the budget line falls inside a call's results, the call and its results go
to the summary and a little less than the budget is kept (as in pi); when no valid
point follows the line at all, the cut moves back to the call, keeping a little more. When the cut
falls inside a user turn (at an assistant message), that turn's prefix is
summarized separately and joined to the summary, so the kept suffix keeps its
context.

`run_compaction` produces the summary: staged summarization for the summarize and
full layers, a mechanical (extractive, LLM-free) summary for the prune layer; file
operations from read/write/edit tool calls plus the previous compaction's details.
The store writes the result as a compaction turn; nothing here touches a database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nexus_store.compaction.extractive import ExtractiveSummarizer
from nexus_store.compaction.policy import CompactionConfig, LayerName
from nexus_store.compaction.stages import summarize_in_stages
from nexus_store.compaction.summarizer import Summarizer
from nexus_store.compaction.summary_text import (
    file_lists,
    format_file_operations,
    strip_file_blocks,
)
from nexus_store.errors import NexusError
from nexus_store.tokens import TokenCounter, message_tokens

__all__ = [
    "BRANCH_SUMMARY_INSTRUCTIONS",
    "TURN_PREFIX_INSTRUCTIONS",
    "BranchSummaryOutcome",
    "CompactionOutcome",
    "CompactionPlan",
    "ContextItem",
    "find_cut_points",
    "plan_compaction",
    "run_branch_summary",
    "run_compaction",
]

TURN_PREFIX_INSTRUCTIONS = (
    "These messages are only the beginning of one turn whose end is kept verbatim. "
    "Say what the user asked in this turn, what was done and decided so far, and what "
    "the kept part needs to be understood."
)
"""Focus given to the summarizer for the prefix of a split turn."""

# Roles that may start the kept part (never toolResult: it must follow its call).
_CUT_ROLES = frozenset(
    {"user", "assistant", "custom", "bashExecution", "branchSummary", "compactionSummary"}
)
# Roles that start a turn of the conversation (bashExecution is user-initiated).
_TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary"})


class ContextItem(BaseModel):
    """One message of a leaf's assembled context.

    Attributes:
        turn_id: Public id of the turn the message belongs to.
        kind: The turn's kind (``message``, ``custom_message``, ``branch_summary``,
            ``compaction``, ...).
        message: The pi agent message.
        tokens: Its stored token count.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    turn_id: str
    kind: str
    message: dict[str, Any]
    tokens: int = Field(ge=0)


class CompactionPlan(BaseModel):
    """What a compaction would fold and keep.

    Attributes:
        first_kept_turn_id: First turn kept verbatim (None when nothing is kept).
        to_summarize: Messages summarized into the history summary, oldest first.
        split_turn_prefix: Messages of a split turn's prefix (summarized separately).
        is_split_turn: Whether the cut falls inside a user turn.
        tokens_before: Tokens of the whole context.
        tokens_kept: Tokens of the kept messages.
        estimated_tokens_after: ``tokens_kept`` plus an estimate of the summary.
        messages_compacted: ``len(to_summarize) + len(split_turn_prefix)``.
        previous_summary: Summary of the previous compaction, updated by this one.
        previous_details: That compaction's details (file lists), carried forward.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    first_kept_turn_id: str | None
    to_summarize: list[dict[str, Any]]
    split_turn_prefix: list[dict[str, Any]]
    is_split_turn: bool
    tokens_before: int
    tokens_kept: int
    estimated_tokens_after: int
    messages_compacted: int
    previous_summary: str | None = None
    previous_details: dict[str, Any] | None = None

    @property
    def is_empty(self) -> bool:
        """True when the cut keeps everything: there is nothing to compact."""
        return self.messages_compacted == 0


class CompactionOutcome(BaseModel):
    """The summary a compaction writes, and what went into it.

    Attributes:
        summary: Summary text, ending with ``<read-files>``/``<modified-files>`` blocks.
        details: ``{"readFiles": [...], "modifiedFiles": [...]}``, sorted.
        tokens_after: Estimated context tokens after compaction (summary + kept),
            None when that estimate is not below ``tokens_before`` (seed 000 discards it).
        partial: True when some messages could not be summarized.
        omitted: Notes of what was left out.
        layer: The layer that produced it.
        stages: Summarizer calls made.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    summary: str
    details: dict[str, list[str]]
    tokens_after: int | None
    partial: bool = False
    omitted: list[str] = []
    layer: LayerName = "summarize"
    stages: int = 0


def _role(item: ContextItem) -> Any:
    return item.message.get("role")


def find_cut_points(items: Sequence[ContextItem], start: int, end: int) -> list[int]:
    """Indices in ``[start, end)`` where the kept part may begin.

    A valid cut point is the first message of its turn (the store keeps whole
    turns) and not a ``toolResult`` (a result must follow its call).

    Args:
        items: The context.
        start: First index considered.
        end: One past the last index considered.

    Returns:
        Ascending indices.
    """
    points = []
    for i in range(start, end):
        first_of_turn = i == start or items[i - 1].turn_id != items[i].turn_id
        if first_of_turn and _role(items[i]) in _CUT_ROLES:
            points.append(i)
    return points


def _turn_start(items: Sequence[ContextItem], index: int, start: int) -> int:
    for i in range(index, start - 1, -1):
        if _role(items[i]) in _TURN_START_ROLES:
            return i
    return -1


def plan_compaction(
    items: Sequence[ContextItem],
    *,
    keep_recent_tokens: int,
    previous_summary: str | None = None,
    previous_details: Mapping[str, Any] | None = None,
    summary_tokens_estimate: int = 4096,
) -> CompactionPlan:
    """Choose what to summarize and what to keep in a leaf's current context.

    Args:
        items: The leaf's context in order; a leading ``compactionSummary`` item is
            the previous compaction (its summary is used if ``previous_summary`` is None).
        keep_recent_tokens: Recent tokens to keep verbatim (the layer's protect budget).
        previous_summary: Summary of the previous compaction on the path.
        previous_details: That compaction's details (``readFiles``/``modifiedFiles``).
        summary_tokens_estimate: Upper bound assumed for the new summary's size.

    Returns:
        A `CompactionPlan`; `CompactionPlan.is_empty` when everything fits.

    Raises:
        NexusError: If ``keep_recent_tokens`` is negative.

    Example:
        >>> def item(turn_id, role, text, tokens):
        ...     message = {"role": role, "content": text}
        ...     return ContextItem(turn_id=turn_id, kind="message", message=message, tokens=tokens)
        >>> items = [
        ...     item("u1", "user", "Port the CLI.", 50),
        ...     item("a1", "assistant", "Done.", 40),
        ...     item("u2", "user", "Now add --json.", 30),
        ...     item("a2", "assistant", "Added.", 20),
        ... ]
        >>> plan = plan_compaction(items, keep_recent_tokens=40)
        >>> plan.first_kept_turn_id, plan.messages_compacted, plan.tokens_kept
        ('u2', 2, 50)
    """
    if keep_recent_tokens < 0:
        raise NexusError(f"keep_recent_tokens must be >= 0 (got {keep_recent_tokens})")
    start = 0
    previous_tokens = 0
    if items and _role(items[0]) == "compactionSummary":
        start = 1
        previous_tokens = items[0].tokens
        if previous_summary is None:
            summary = items[0].message.get("summary")
            previous_summary = summary if isinstance(summary, str) else None
    end = len(items)
    tokens_before = sum(item.tokens for item in items)
    details = dict(previous_details) if previous_details else None

    def plan(cut: int, turn_start: int) -> CompactionPlan:
        split = turn_start != -1
        history_end = turn_start if split else cut
        summarize = [dict(items[i].message) for i in range(start, history_end)]
        prefix = [dict(items[i].message) for i in range(turn_start, cut)] if split else []
        kept = sum(items[i].tokens for i in range(cut, end))
        compacted = len(summarize) + len(prefix)
        folded = sum(items[i].tokens for i in range(start, cut)) + previous_tokens
        estimate = kept + min(folded, summary_tokens_estimate) if compacted else tokens_before
        return CompactionPlan(
            first_kept_turn_id=items[cut].turn_id if cut < end else None,
            to_summarize=summarize,
            split_turn_prefix=prefix,
            is_split_turn=split and bool(prefix),
            tokens_before=tokens_before,
            tokens_kept=kept if compacted else tokens_before,
            estimated_tokens_after=estimate,
            messages_compacted=compacted,
            previous_summary=previous_summary,
            previous_details=details,
        )

    cut_points = find_cut_points(items, start, end)
    if not cut_points:
        return plan(start, -1)
    cut = start  # everything fits in keep_recent_tokens: nothing to compact
    accumulated = 0
    for i in range(end - 1, start - 1, -1):
        accumulated += items[i].tokens
        if accumulated >= keep_recent_tokens:
            after = [c for c in cut_points if c >= i]
            # No valid point at or after i (a trailing run of tool results): cut at
            # the call that produced them, keeping a little more than asked.
            cut = after[0] if after else max(c for c in cut_points if c < i)
            break
    if cut == start or _role(items[cut]) == "user":
        return plan(cut, -1)
    turn_start = _turn_start(items, cut, start)
    if turn_start == cut:
        turn_start = -1  # the cut itself starts a turn (bash, custom, ...): not a split
    return plan(cut, turn_start)


def run_compaction(
    plan: CompactionPlan,
    summarizer: Summarizer,
    counter: TokenCounter,
    cfg: CompactionConfig,
    *,
    instructions: str | None = None,
    layer: LayerName = "summarize",
) -> CompactionOutcome:
    """Produce the summary a compaction turn will carry.

    Args:
        plan: Output of `plan_compaction` (must not be empty).
        summarizer: Used by the summarize and full layers.
        counter: Counts the summary's tokens for ``tokens_after``.
        cfg: Window, chunk budget, parts and summary budget.
        instructions: The user's focus (``--focus``).
        layer: ``prune`` writes a mechanical summary without calling ``summarizer``.

    Returns:
        A `CompactionOutcome`.

    Raises:
        NexusError: If the plan is empty.
        SummarizerError: When no summary could be produced (nothing should be written).
    """
    if plan.is_empty:
        raise NexusError(
            "nothing to compact: the context fits in keep_recent_tokens "
            f"({plan.tokens_before} tokens); lower keep_recent_tokens to compact anyway"
        )
    details = file_lists([*plan.to_summarize, *plan.split_turn_prefix], plan.previous_details)
    previous = strip_file_blocks(plan.previous_summary) if plan.previous_summary else None
    max_tokens = cfg.summarizer.max_tokens
    omitted: list[str] = []
    partial = False
    stages = 0
    if layer == "prune":
        # The prune layer never calls a model (seed 002): an extractive digest of the
        # folded messages, carrying the previous summary, under a mechanical header.
        mechanical = ExtractiveSummarizer()
        body = mechanical.summarize(
            [*plan.to_summarize, *plan.split_turn_prefix],
            previous_summary=previous,
            instructions=instructions,
            max_tokens=max_tokens,
        )
        tool_results = sum(
            1
            for m in [*plan.to_summarize, *plan.split_turn_prefix]
            if m.get("role") == "toolResult"
        )
        header = (
            f"[Mechanical compaction (prune layer, no LLM): {plan.messages_compacted} earlier "
            f"messages folded, including {tool_results} tool outputs.]"
        )
        summary = f"{header}\n\n{body}"
    else:
        common: dict[str, Any] = {
            "max_chunk_tokens": cfg.max_chunk_tokens,
            "context_window": cfg.context_window,
            "parts": cfg.summary_parts,
            "max_tokens": max_tokens,
        }
        if plan.to_summarize:
            history = summarize_in_stages(
                plan.to_summarize,
                summarizer,
                counter,
                previous_summary=previous,
                instructions=instructions,
                **common,
            )
            summary, partial, stages = history.summary, history.partial, history.stages
            omitted.extend(history.omitted)
        else:
            summary = previous or "No prior history."
        if plan.is_split_turn:
            prefix = summarize_in_stages(
                plan.split_turn_prefix,
                summarizer,
                counter,
                instructions=TURN_PREFIX_INSTRUCTIONS
                + (f" Also pay attention to: {instructions}" if instructions else ""),
                **common,
            )
            summary = f"{summary}\n\n---\n\n**Turn context (split turn):**\n\n{prefix.summary}"
            partial = partial or prefix.partial
            stages += prefix.stages
            omitted.extend(prefix.omitted)
    summary = summary.rstrip() + format_file_operations(
        details["readFiles"], details["modifiedFiles"]
    )
    summary_tokens = message_tokens(counter, {"role": "compactionSummary", "summary": summary})
    tokens_after: int | None = summary_tokens + plan.tokens_kept
    if tokens_after is not None and tokens_after >= plan.tokens_before:
        tokens_after = None
    return CompactionOutcome(
        summary=summary,
        details=details,
        tokens_after=tokens_after,
        partial=partial,
        omitted=omitted,
        layer=layer,
        stages=stages,
    )


# -- branch summaries --------------------------------------------------------------

BRANCH_SUMMARY_INSTRUCTIONS = (
    "These messages are a branch of the session that the user is now leaving for another "
    "point of the conversation. Record what was tried there, what worked, what failed and "
    "why, so that the other branch does not repeat it."
)
"""Focus given to the summarizer for an abandoned branch."""

BRANCH_SUMMARY_PREAMBLE = (
    "The user explored another branch of this session before coming back here.\n"
)
"""First line of every branch summary, so a model reading it knows what it is."""


class BranchSummaryOutcome(BaseModel):
    """The summary a branch-summary turn will carry.

    Attributes:
        summary: Preamble, summary, and ``<read-files>``/``<modified-files>`` blocks.
        details: ``{"readFiles": [...], "modifiedFiles": [...]}`` over the whole branch.
        messages_summarized: Messages given to the summarizer (after the budget).
        partial: True when some messages could not be summarized.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    summary: str
    details: dict[str, list[str]]
    messages_summarized: int
    partial: bool = False


def run_branch_summary(
    messages: Sequence[Mapping[str, Any]],
    summarizer: Summarizer,
    counter: TokenCounter,
    cfg: CompactionConfig,
    *,
    tokens: Sequence[int] | None = None,
    token_budget: int | None = None,
    previous_details: Sequence[Mapping[str, Any]] = (),
    instructions: str | None = None,
) -> BranchSummaryOutcome | None:
    """Summarize an abandoned branch (old leaf back to the common ancestor).

    As in pi's branch summarization, tool results are left out (the calls say what
    was done), and when the branch exceeds ``token_budget`` its newest messages are
    kept. File operations are collected over the whole branch, plus the details of
    branch summaries inside it.

    Args:
        messages: The branch's agent messages, oldest first.
        summarizer: Any `Summarizer`.
        counter: Counts tokens when ``tokens`` is not given.
        cfg: Window, chunk budget and summary budget.
        tokens: Stored token count of each message.
        token_budget: Most tokens of messages to summarize (default: the window
            minus the reserve floor).
        previous_details: ``details`` of branch summaries within the branch.
        instructions: The user's focus.

    Returns:
        The outcome, or None when the branch has nothing to summarize.

    Raises:
        NexusError: If ``tokens`` does not have one count per message.
        SummarizerError: When no summary could be produced.
    """
    if tokens is None:
        tokens = [message_tokens(counter, m) for m in messages]
    elif len(tokens) != len(messages):
        raise NexusError(
            f"got {len(tokens)} token counts for {len(messages)} messages; pass one per message"
        )
    budget = (
        token_budget
        if token_budget is not None
        else (cfg.context_window - cfg.reserve_tokens_floor)
    )
    chosen: list[Mapping[str, Any]] = []
    used = 0
    for message, cost in zip(reversed(messages), reversed(tokens), strict=True):
        if message.get("role") == "toolResult":
            continue
        if used + cost > budget:
            break
        chosen.append(message)
        used += cost
    chosen.reverse()
    if not chosen:
        return None
    details = file_lists(messages, *previous_details)
    staged = summarize_in_stages(
        chosen,
        summarizer,
        counter,
        max_chunk_tokens=cfg.max_chunk_tokens,
        context_window=cfg.context_window,
        parts=cfg.summary_parts,
        max_tokens=cfg.summarizer.max_tokens,
        instructions=BRANCH_SUMMARY_INSTRUCTIONS
        + (f" Also pay attention to: {instructions}" if instructions else ""),
    )
    summary = (
        BRANCH_SUMMARY_PREAMBLE
        + staged.summary
        + format_file_operations(details["readFiles"], details["modifiedFiles"])
    )
    return BranchSummaryOutcome(
        summary=summary,
        details=details,
        messages_summarized=len(chosen),
        partial=staged.partial,
    )
