"""Compaction of a stored session: read through a `Store`, plan, summarize, write back.

The planning and the summaries are pure (`nexus_store.compaction.plan`); `Compaction`
reads the leaf's context (which already starts at the previous compaction's first
kept turn, so nothing the previous compaction kept is lost) and writes the result as
a new compaction turn under the leaf, through the store's public methods. No turn is
ever deleted or changed: earlier leaves keep their contexts. A summarizer failure
writes nothing.

`Store.compact`, `Store.navigate_with_summary` and the other compaction methods of
`Store` are one-line calls into a `Compaction` over the store; the store is handed
in, never imported at run time, so the package sits above the storage layer.

Example:
    >>> from nexus_store import Store
    >>> store = Store(memory=True, counter="chars4")
    >>> s = store.create_session(id="demo")
    >>> for i in range(4):
    ...     message = {"role": "user", "content": f"step {i}", "timestamp": 0}
    ...     _ = store.append_message("demo", message)
    >>> compaction = Compaction(store)
    >>> result = compaction.compact("demo", keep_recent_tokens=0, summarizer="extractive")
    >>> result.plan.messages_compacted  # a cut falls before a user message: the last stays
    3
    >>> [t.id for t in compaction.compaction_history("demo")] == [result.turn.id]
    True
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from nexus_store.compaction import policy
from nexus_store.compaction.plan import (
    CompactionOutcome,
    CompactionPlan,
    ContextItem,
    plan_compaction,
    run_branch_summary,
    run_compaction,
)
from nexus_store.compaction.policy import CompactionConfig
from nexus_store.compaction.prune import PruneConfig, PruneResult, prune_context
from nexus_store.compaction.summarizer import Summarizer, get_summarizer
from nexus_store.errors import NexusError
from nexus_store.models import Context, Turn
from nexus_store.tokens import message_tokens

if TYPE_CHECKING:  # the store is handed in; importing it at run time would be a circle
    from nexus_store.store import Store

__all__ = ["CompactResult", "Compaction", "resolve_summarizer"]


class CompactResult(BaseModel):
    """What `Store.compact` planned, and wrote unless it was a dry run.

    Attributes:
        plan: The cut and what is summarized.
        outcome: The summary (None for a dry run).
        turn: The compaction turn written (None for a dry run).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    plan: CompactionPlan
    outcome: CompactionOutcome | None = None
    turn: Turn | None = None


def resolve_summarizer(summarizer: Summarizer | str | None, cfg: CompactionConfig) -> Summarizer:
    """The summarizer to use: the one given, one named, or the config's.

    Args:
        summarizer: A `Summarizer`, a name (``"extractive"``, ``"openai"``, ...) or None.
        cfg: The configuration; its ``summarizer`` section gives the default kind and
            the HTTP options (base URL, model, timeout, retries).

    Returns:
        A summarizer instance.

    Raises:
        SummarizerError: When a named summarizer is unknown or cannot be configured.

    Example:
        >>> resolve_summarizer("extractive", CompactionConfig()).__class__.__name__
        'ExtractiveSummarizer'
    """
    if summarizer is None:
        summarizer = cfg.summarizer.kind
    if isinstance(summarizer, str):
        if summarizer == "extractive":
            return get_summarizer("extractive")
        options = cfg.summarizer
        opts: dict[str, Any] = {"timeout": options.timeout, "max_retries": options.max_retries}
        if options.base_url:
            opts["base_url"] = options.base_url
        if options.model:
            opts["model"] = options.model
        return get_summarizer(summarizer, **opts)
    return summarizer


class Compaction:
    """Compaction over a store: reads and writes only through the `Store` API.

    Args:
        store: The store to read from and write to.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def context_items(self, session_id: str, leaf_id: str | None = None) -> list[ContextItem]:
        """The leaf's context as planning items (turn id, kind, message, tokens).

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).

        Returns:
            One item per message of the context, in order.
        """
        ctx = self.store.context(session_id, leaf_id)
        # Values read back from our own rows: no need to validate them again.
        return [
            ContextItem.model_construct(turn_id=t, kind=k, message=m, tokens=n)
            for t, k, m, n in zip(
                ctx.turn_ids, ctx.turn_kinds, ctx.messages, ctx.message_tokens, strict=True
            )
            if isinstance(m, dict)
        ]

    def compact(
        self,
        session_id: str,
        *,
        leaf_id: str | None = None,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        keep_recent_tokens: int | None = None,
        instructions: str | None = None,
        trigger: Literal["manual", "auto"] = "manual",
        layer: Literal["prune", "summarize", "full"] = "summarize",
        dry_run: bool = False,
    ) -> CompactResult:
        """Summarize the older part of a leaf's context into a new compaction turn.

        The cut keeps the most recent ``keep_recent_tokens`` and never separates a
        tool call from its results. The window starts at the previous compaction's
        first kept turn and the previous summary is updated, not dropped. The
        compaction turn is written as a child of the leaf and becomes the active leaf.

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).
            summarizer: A Summarizer, or ``"extractive"`` / ``"openai"`` (default from config).
            config: Compaction settings (default: `CompactionConfig()`).
            keep_recent_tokens: Tokens kept verbatim (default from config).
            instructions: The user's focus for the summary.
            trigger: ``manual`` or ``auto``, recorded on the turn.
            layer: ``prune`` (mechanical summary, no model), ``summarize`` or ``full``.
            dry_run: Plan only; write nothing.

        Returns:
            The plan, and for a real run the summary and the turn written.

        Raises:
            NexusError: When there is nothing to compact.
            SummarizerError: When no summary could be produced (nothing is written).
        """
        cfg = config or CompactionConfig()
        keep = cfg.keep_recent_tokens if keep_recent_tokens is None else keep_recent_tokens
        layer_config = cfg.layer(layer)
        if layer != "summarize" and keep_recent_tokens is None and layer_config is not None:
            keep = layer_config.protect_recent_tokens
        session = self.store.get_session(session_id)
        leaf = leaf_id if leaf_id is not None else session.active_leaf
        if leaf is None:
            # reading the active leaf's path raises when it names a turn that is gone (issue 18):
            # that is the error to show, not "no turns"
            self.store.path(session_id)
            raise NexusError(f"session {session_id!r} has no turns to compact")
        items = self.context_items(session_id, leaf)
        previous_summary = None
        previous_details = None
        if items and items[0].message.get("role") == "compactionSummary":
            summary = items[0].message.get("summary")
            previous_summary = summary if isinstance(summary, str) else None
            details = self.store.get_turn(session_id, items[0].turn_id).entry.get("details")
            previous_details = details if isinstance(details, dict) else None
        plan = plan_compaction(
            items,
            keep_recent_tokens=keep,
            previous_summary=previous_summary,
            previous_details=previous_details,
        )
        if dry_run:
            return CompactResult(plan=plan)
        outcome = run_compaction(
            plan,
            resolve_summarizer(summarizer, cfg),
            self.store.counter,
            cfg,
            instructions=instructions,
            layer=layer,
        )
        turn_id = secrets.token_hex(4)
        entry: dict[str, Any] = {
            "type": "compaction",
            "id": turn_id,
            "parentId": leaf,
            "summary": outcome.summary,
            # nothing kept: the compaction names itself, which pi reads as "keep nothing"
            "firstKeptEntryId": plan.first_kept_turn_id or turn_id,
            "tokensBefore": plan.tokens_before,
            "details": outcome.details,
            "trigger": trigger,
            "layer": outcome.layer,
            "messagesCompacted": plan.messages_compacted,
        }
        if outcome.tokens_after is not None:
            entry["tokensAfter"] = outcome.tokens_after
        if instructions:
            entry["customInstruction"] = instructions
        turn = self.store.append_entry(session_id, entry)
        return CompactResult(plan=plan, outcome=outcome, turn=turn)

    def navigate_with_summary(
        self,
        session_id: str,
        turn_id: str | None,
        *,
        summarizer: Summarizer | str | None = None,
        config: CompactionConfig | None = None,
        instructions: str | None = None,
    ) -> Turn | None:
        """Move the active leaf to ``turn_id``, summarizing the branch being left.

        The abandoned part (from the old leaf back to its common ancestor with the
        target) is summarized into a branch-summary turn at the new position, which
        becomes the active leaf (pi's ``branchWithSummary``). When the old branch has
        nothing to summarize, this is a plain navigate.

        Args:
            session_id: The session.
            turn_id: The new position (None: before the first turn).
            summarizer: A Summarizer or a name (default from config).
            config: Compaction settings (default: `CompactionConfig()`).
            instructions: The user's focus for the summary.

        Returns:
            The branch-summary turn, or None when nothing was summarized.

        Raises:
            TurnNotFound: When ``turn_id`` is not in the session.
            SummarizerError: When no summary could be produced (the leaf does not move).
        """
        cfg = config or CompactionConfig()
        old = self.store.get_session(session_id).active_leaf
        if turn_id is not None:
            self.store.get_turn(session_id, turn_id)  # raises TurnNotFound
        if old is None or old == turn_id:
            self.store.navigate(session_id, turn_id)
            return None
        ancestor = None if turn_id is None else self.store.common_ancestor(session_id, old, turn_id)
        path: Sequence[Turn] = self.store.path(session_id, old)
        start = 0 if ancestor is None else ancestor.depth + 1
        messages: list[dict[str, Any]] = []
        tokens: list[int] = []
        previous: list[dict[str, Any]] = []
        for turn in path[start:]:
            if turn.kind == "message":
                for m in turn.entry.get("messages") or [turn.entry.get("message")]:
                    if isinstance(m, dict):
                        messages.append(m)
                        tokens.append(message_tokens(self.store.counter, m))
            elif turn.kind == "branch_summary" and isinstance(turn.entry.get("details"), dict):
                previous.append(turn.entry["details"])
        outcome = run_branch_summary(
            messages,
            resolve_summarizer(summarizer, cfg),
            self.store.counter,
            cfg,
            tokens=tokens,
            previous_details=previous,
            instructions=instructions,
        )
        if outcome is None:
            self.store.navigate(session_id, turn_id)
            return None
        return self.store.append_branch_summary(
            session_id, turn_id, outcome.summary, details=outcome.details
        )

    def pruned_context(
        self, session_id: str, leaf_id: str | None = None, config: PruneConfig | None = None
    ) -> tuple[Context, PruneResult]:
        """The leaf's context with old tool outputs pruned (a view; nothing is written).

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).
            config: Pruning settings (default: `PruneConfig()`).

        Returns:
            The pruned context and the report of what was pruned.
        """
        ctx = self.store.context(session_id, leaf_id)
        result = prune_context(ctx.messages, ctx.message_tokens, config or PruneConfig())
        pruned = ctx.model_copy(
            update={
                "messages": result.messages,
                "message_tokens": result.tokens,
                "tokens": result.tokens_after,
            }
        )
        return pruned, result

    def compaction_history(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """The compactions on the path to a leaf, oldest first.

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).

        Returns:
            The compaction turns on the path.
        """
        return [t for t in self.store.path(session_id, leaf_id) if t.kind == "compaction"]

    # -- memory flush (seed 003: once per compaction epoch) -----------------------

    def should_flush(self, session_id: str, leaf_id: str | None = None) -> bool:
        """Whether the pre-compaction memory flush is due in the leaf's compaction epoch.

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).

        Returns:
            True until `record_flush` ran in the current epoch.
        """
        epoch = self.store.get_session(session_id).flush_epoch
        return policy.should_flush(epoch, self.store.status(session_id, leaf_id).compactions)

    def record_flush(self, session_id: str, leaf_id: str | None = None) -> int:
        """Record that the flush ran in the leaf's current epoch.

        Args:
            session_id: The session.
            leaf_id: The leaf (default: the active leaf).

        Returns:
            The epoch recorded on the session.
        """
        epoch = policy.record_flush(self.store.status(session_id, leaf_id).compactions)
        self.store.set_flush_epoch(session_id, epoch)
        return epoch
