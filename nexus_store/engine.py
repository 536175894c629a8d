"""The context-engine lifecycle (seeds/004) on top of a `Store`.

An agent runtime calls the engine at fixed points of each run: `bootstrap` when it
first sees a session, `ingest` / `ingest_batch` as messages arrive, `assemble`
before each model call, `after_turn` after it (the layered compaction policy and
the memory-flush decision live there), `compact` on ``/compact`` or overflow, and
`prepare_subagent_spawn` / `on_subagent_ended` around sub-agents. The engine owns
compaction (``owns_compaction``): the runtime's own auto-compaction should be off.

Nothing here holds state that the database does not: an engine can be dropped and
rebuilt at any time, and several processes can drive one database.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from nexus_store import __version__
from nexus_store.budget import check_budget, fit_to_budget
from nexus_store.compaction.policy import (
    CompactionConfig,
    evaluate_degradation,
    select_layer,
    should_block_auto_compaction,
    should_compact,
)
from nexus_store.compaction.prune import tool_output_tokens
from nexus_store.compaction.summarizer import Summarizer
from nexus_store.errors import NexusError
from nexus_store.models import Turn
from nexus_store.store import Store

__all__ = [
    "AfterTurnResult",
    "AssembleResult",
    "CompactOutcome",
    "ContextEngine",
    "EngineInfo",
    "IngestResult",
    "SpawnPreparation",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class EngineInfo(BaseModel):
    """Who the engine is and whether it owns compaction."""

    model_config = _FROZEN

    id: str = "nexus_store"
    name: str = "nexus_store context engine"
    version: str = __version__
    owns_compaction: bool = True


class IngestResult(BaseModel):
    """What `ContextEngine.ingest` stored."""

    model_config = _FROZEN

    ingested: bool
    turn_id: str | None = None


class AssembleResult(BaseModel):
    """The messages for a model run.

    Attributes:
        messages: pi agent messages, oldest first, within the token budget.
        estimated_tokens: Their stored token count.
        system_prompt_addition: Text to prepend to the system prompt (workspace files).
        pruned: Tool outputs replaced by placeholders to fit the budget.
        dropped: Oldest messages left out because the budget was still exceeded.
    """

    model_config = _FROZEN

    messages: list[dict[str, Any]]
    estimated_tokens: int
    system_prompt_addition: str | None = None
    pruned: int = 0
    dropped: int = 0


class CompactOutcome(BaseModel):
    """What `ContextEngine.compact` did."""

    model_config = _FROZEN

    ok: bool
    compacted: bool
    reason: str | None = None
    turn_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    layer: str | None = None


class AfterTurnResult(BaseModel):
    """What `ContextEngine.after_turn` decided and did.

    Attributes:
        tokens: Context tokens after the turn.
        flushed: The memory flush ran in this call (once per compaction epoch).
        compaction: The compaction it ran, if the trigger formula fired.
        risk: Degradation risk after it.
        warning: A message for the user when the risk is high or compaction is blocked.
    """

    model_config = _FROZEN

    tokens: int
    flushed: bool = False
    compaction: CompactOutcome | None = None
    risk: str = "low"
    warning: str | None = None


class SpawnPreparation(BaseModel):
    """A prepared sub-agent session; call `ContextEngine.rollback_spawn` if the spawn fails."""

    model_config = _FROZEN

    parent_session_id: str
    child_session_id: str
    context_mode: Literal["isolated", "fork"]
    fork_turn_id: str | None = None


class ContextEngine:
    """The seed-004 lifecycle over a nexus_store database.

    Example:
        >>> engine = ContextEngine(Store(memory=True, counter="chars4"))
        >>> sid = engine.bootstrap()
        >>> _ = engine.ingest(sid, {"role": "user", "content": "hi", "timestamp": 0})
        >>> engine.assemble(sid).messages
        [{'role': 'user', 'content': 'hi', 'timestamp': 0}]

    Args:
        store: The store (the engine does not close it unless ``owns_store``).
        config: Compaction settings (window, trigger formula, layers, limits).
        summarizer: Summarizer for compactions (default: the config's kind).
        workspace_dir: Folder whose bootstrap files (AGENTS.md, ...) are offered as
            the system-prompt addition.
        owns_store: Close the store on `dispose`.
    """

    def __init__(
        self,
        store: Store,
        *,
        config: CompactionConfig | None = None,
        summarizer: Summarizer | str | None = None,
        workspace_dir: str | Path | None = None,
        owns_store: bool = False,
    ) -> None:
        self.store = store
        self.config = config or CompactionConfig()
        self.summarizer = summarizer
        self.workspace_dir = Path(workspace_dir) if workspace_dir is not None else None
        self.owns_store = owns_store
        self.info = EngineInfo()

    @property
    def owns_compaction(self) -> bool:
        """True: the engine compacts; the runtime's own auto-compaction should be off."""
        return self.info.owns_compaction

    # -- lifecycle ------------------------------------------------------------------------

    def bootstrap(
        self,
        session_id: str | None = None,
        *,
        transcript: str | Path | None = None,
        cwd: str | None = None,
    ) -> str:
        """Make sure a session exists; import an existing JSONL transcript into it.

        Args:
            session_id: An existing or new session id (new: generated when omitted).
            transcript: A pi / OpenClaw / Claude Code / Codex JSONL file to import.
            cwd: Working directory of a new session.

        Returns:
            The session id.
        """
        if transcript is not None:
            ids = self.store.import_jsonl(transcript)
            if not ids:
                raise NexusError(f"{transcript} holds no session to bootstrap from")
            return ids[0]
        if session_id is not None and self.store.find_session(session_id) is not None:
            return session_id
        return self.store.create_session(id=session_id, cwd=cwd).id

    def ingest(
        self, session_id: str, message: Mapping[str, Any], *, is_heartbeat: bool = False
    ) -> IngestResult:
        """Store one message as a turn under the active leaf (heartbeats are not stored)."""
        if is_heartbeat:
            return IngestResult(ingested=False)
        turn = self.store.append_message(session_id, message)
        return IngestResult(ingested=True, turn_id=turn.id)

    def ingest_batch(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> IngestResult:
        """Store a completed turn's messages as one turn (one transaction)."""
        if not messages:
            return IngestResult(ingested=False)
        turn = self.store.append_messages(session_id, messages)
        return IngestResult(ingested=True, turn_id=turn.id)

    def assemble(
        self, session_id: str, *, token_budget: int | None = None, leaf_id: str | None = None
    ) -> AssembleResult:
        """The messages for the next model run, within ``token_budget``.

        The leaf's context (pi's semantics). Over budget (see `nexus_store.budget`): old
        tool outputs are pruned (a view: nothing is written), then whole exchanges are
        left out from the old end, then older units of the newest exchange, then the
        remaining tool outputs become placeholders; a tool call is never kept without
        its results nor a result without its call, and the result never exceeds the
        budget. One pass: linear in the context's length.

        Raises:
            InvalidArgument: If ``token_budget`` is not None or a whole number >= 0.
            DanglingLeaf: If the session's active leaf points at no turn.
        """
        budget = check_budget(token_budget)
        ctx = self.store.context(session_id, leaf_id)
        messages: list[dict[str, Any]] = [m for m in ctx.messages if isinstance(m, dict)]
        tokens = [
            t for m, t in zip(ctx.messages, ctx.message_tokens, strict=True) if isinstance(m, dict)
        ]
        pruned = dropped = 0
        if budget is not None:
            fitted = fit_to_budget(messages, tokens, budget, self.config.prune)
            messages, tokens = fitted.messages, fitted.tokens
            pruned, dropped = fitted.pruned, fitted.dropped
        # model_construct: the values are built here; validating copies every message
        return AssembleResult.model_construct(
            messages=messages,
            estimated_tokens=sum(tokens),
            system_prompt_addition=self._system_prompt_addition(session_id),
            pruned=pruned,
            dropped=dropped,
        )

    def compact(
        self,
        session_id: str,
        *,
        force: bool = False,
        custom_instructions: str | None = None,
        leaf_id: str | None = None,
    ) -> CompactOutcome:
        """Compact the session's context when the trigger formula says so (or ``force``).

        The layer follows the layered policy (prune / summarize / full by how full
        the window is); a forced compaction summarizes. Automatic compactions stop at
        ``max_auto_compactions`` on a path.
        """
        status = self.store.status(session_id, leaf_id, config=self.config)
        if not force and not should_compact(status.tokens, self.config):
            return CompactOutcome(ok=True, compacted=False, reason="below the compaction threshold")
        if not force and should_block_auto_compaction(status.compactions, self.config):
            return CompactOutcome(
                ok=False,
                compacted=False,
                reason=f"{status.compactions} automatic compactions on this path "
                f"(limit {self.config.max_auto_compactions}); start a fresh session",
            )
        layer_name: Literal["prune", "summarize", "full"] = "summarize"
        if not force:
            ctx = self.store.context(session_id, leaf_id)
            tool_tokens = tool_output_tokens(ctx.messages, ctx.message_tokens)
            layer = select_layer(status.tokens, tool_tokens, self.config)
            if layer is not None:
                layer_name = layer.name
        try:
            result = self.store.compact(
                session_id,
                leaf_id=leaf_id,
                summarizer=self.summarizer,
                config=self.config,
                instructions=custom_instructions,
                trigger="manual" if force else "auto",
                layer=layer_name,
            )
        except NexusError as err:
            return CompactOutcome(ok=False, compacted=False, reason=str(err))
        turn: Turn | None = result.turn
        # the new compaction is now the active leaf
        after = self.store.status(session_id, config=self.config).tokens
        return CompactOutcome(
            ok=True,
            compacted=True,
            turn_id=None if turn is None else turn.id,
            tokens_before=result.plan.tokens_before,
            tokens_after=after,
            layer=layer_name,
        )

    def after_turn(
        self, session_id: str, *, flush: Callable[[str], None] | None = None
    ) -> AfterTurnResult:
        """Post-run work: the memory flush (once per epoch) and proactive compaction.

        When the trigger formula fires (tokens >= window - reserve floor - soft
        threshold), ``flush(session_id)`` runs first if this compaction epoch has not
        been flushed yet (seed 003), then the layered compaction.
        """
        status = self.store.status(session_id, config=self.config)
        flushed = False
        compaction = None
        if self.config.auto_enabled and should_compact(status.tokens, self.config):
            if flush is not None and self.store.should_flush(session_id):
                flush(session_id)
                self.store.record_flush(session_id)
                flushed = True
            compaction = self.compact(session_id)
        after = self.store.status(session_id, config=self.config)
        degradation = evaluate_degradation(after.compactions, self.config)
        warning = None
        if compaction is not None and not compaction.ok:
            warning = compaction.reason
        elif degradation.risk in ("high", "critical"):
            warning = degradation.recommendation
        return AfterTurnResult(
            tokens=after.tokens,
            flushed=flushed,
            compaction=compaction,
            risk=degradation.risk,
            warning=warning,
        )

    def prepare_subagent_spawn(
        self,
        parent_session_id: str,
        *,
        context_mode: Literal["isolated", "fork"] = "isolated",
        child_session_id: str | None = None,
    ) -> SpawnPreparation:
        """Create the sub-agent's session before it starts.

        ``isolated``: an empty session linked to its parent. ``fork``: a session
        whose context begins with the parent's current path (the parent's turns are
        not copied: the child's first turn continues from the parent's active leaf).
        """
        if context_mode not in ("isolated", "fork"):
            raise NexusError(f"context_mode must be 'isolated' or 'fork', not {context_mode!r}")
        parent = self.store.get_session(parent_session_id)
        fork_turn = parent.active_leaf if context_mode == "fork" else None
        child = self.store.create_session(
            id=child_session_id,
            cwd=parent.cwd,
            parent_session=parent_session_id,
            fork_turn=fork_turn,
        )
        return SpawnPreparation(
            parent_session_id=parent_session_id,
            child_session_id=child.id,
            context_mode=context_mode,
            fork_turn_id=fork_turn,
        )

    def rollback_spawn(self, preparation: SpawnPreparation) -> bool:
        """Undo `prepare_subagent_spawn` when the spawn failed (only an unused session goes).

        Returns:
            True if the session was removed; False if it already has turns (kept).
        """
        return self.store.delete_session_if_empty(preparation.child_session_id)

    def on_subagent_ended(
        self, child_session_id: str, *, result: str | None = None, reason: str = "completed"
    ) -> Turn | None:
        """Record in the parent session that a sub-agent ended (with its result, if any)."""
        child = self.store.get_session(child_session_id)
        if child.parent_session is None:
            return None
        entry: dict[str, Any] = {
            "type": "custom",
            "customType": "nexus.subagent_ended",
            "data": {"session": child_session_id, "reason": reason, "result": result},
        }
        return self.store.append_entry(child.parent_session, entry)

    def dispose(self) -> None:
        """Release resources (closes the store when the engine owns it)."""
        if self.owns_store:
            self.store.close()

    # -- helpers ----------------------------------------------------------------------------

    def _system_prompt_addition(self, session_id: str) -> str | None:
        if self.workspace_dir is None:
            return None
        try:
            workspace: Any = importlib.import_module("nexus_store.workspace")
        except ImportError:  # pragma: no cover - the workspace module ships with the package
            return None
        files = workspace.load_bootstrap_files(self.workspace_dir)
        recorder = getattr(self.store, "record_workspace", None)
        if recorder is not None:
            recorder(session_id, files)
        addition: str | None = workspace.system_prompt_addition(files) or None
        return addition
