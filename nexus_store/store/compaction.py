"""The compaction methods of `Store`: one-line calls into `nexus_store.compaction`.

Planning, summarizing and pruning live above the storage layer in the
`nexus_store.compaction` package, which reads and writes through the store's public
methods. What stays here is the storage side: the flush-epoch write, and the
delegations that keep `Store.compact` and its siblings where users look for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, cast

from nexus_store.compaction.plan import ContextItem
from nexus_store.compaction.policy import CompactionConfig
from nexus_store.compaction.prune import PruneConfig, PruneResult
from nexus_store.compaction.runner import Compaction, CompactResult
from nexus_store.compaction.summarizer import Summarizer
from nexus_store.models import Context, Turn

if TYPE_CHECKING:
    from nexus_store.store.core import Store

__all__ = ["CompactResult", "CompactionMixin"]


class CompactionMixin:
    """Compaction methods of `Store` (see `nexus_store.compaction.Compaction`)."""

    def _as_store(self) -> Store:
        return cast("Store", self)

    def _compaction(self) -> Compaction:
        return Compaction(self._as_store())

    def context_items(self, session_id: str, leaf_id: str | None = None) -> list[ContextItem]:
        """The leaf's context as planning items (turn id, kind, message, tokens)."""
        return self._compaction().context_items(session_id, leaf_id)

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

        The compaction turn is written as a child of the leaf and becomes the active
        leaf; ``dry_run=True`` only plans. Arguments, result and errors: see
        `nexus_store.compaction.Compaction.compact`.
        """
        return self._compaction().compact(
            session_id,
            leaf_id=leaf_id,
            summarizer=summarizer,
            config=config,
            keep_recent_tokens=keep_recent_tokens,
            instructions=instructions,
            trigger=trigger,
            layer=layer,
            dry_run=dry_run,
        )

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

        Returns the branch-summary turn, or None when nothing was summarized; see
        `nexus_store.compaction.Compaction.navigate_with_summary`.
        """
        return self._compaction().navigate_with_summary(
            session_id,
            turn_id,
            summarizer=summarizer,
            config=config,
            instructions=instructions,
        )

    def pruned_context(
        self, session_id: str, leaf_id: str | None = None, config: PruneConfig | None = None
    ) -> tuple[Context, PruneResult]:
        """The leaf's context with old tool outputs pruned (a view; nothing is written)."""
        return self._compaction().pruned_context(session_id, leaf_id, config)

    def compaction_history(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """The compactions on the path to a leaf, oldest first."""
        return self._compaction().compaction_history(session_id, leaf_id)

    # -- memory flush (seed 003: once per compaction epoch) ---------------------------

    def should_flush(self, session_id: str, leaf_id: str | None = None) -> bool:
        """Whether the pre-compaction memory flush is due in the leaf's compaction epoch."""
        return self._compaction().should_flush(session_id, leaf_id)

    def record_flush(self, session_id: str, leaf_id: str | None = None) -> int:
        """Record that the flush ran in the leaf's current epoch; return that epoch."""
        return self._compaction().record_flush(session_id, leaf_id)

    def set_flush_epoch(self, session_id: str, epoch: int | None) -> None:
        """Store the compaction epoch in which the memory flush last ran (None: never).

        Args:
            session_id: The session.
            epoch: The epoch (`nexus_store.compaction.policy.record_flush` computes it).

        Raises:
            SessionNotFound: When the session does not exist.
        """
        store = self._as_store()
        with store.atomic():
            key = store._session_key(session_id)
            store.conn.execute("update sessions set flush_epoch = ? where id = ?", [epoch, key])
