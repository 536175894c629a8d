"""Compaction above the store: plan, staged summaries, summarizers, policy and pruning.

The modules here are pure or talk only to a summarizer endpoint; a `Store` is handed
in (never imported at run time) and written through its public methods, so the
storage layer stays free of summaries and prompts.

* `plan` — where to cut a context and how to produce the summary.
* `stages` — staged summarization with fallbacks (chunks, oversized messages, merges).
* `summarizer`, `extractive`, `prompts` — the `Summarizer` protocol, the HTTP client,
  the offline extractive summarizer and the prompts.
* `summary_text` — transcript serialization and file lists for summaries.
* `policy` — configuration (`load_config`) and decisions (trigger, layer, degradation).
* `prune` — the prune view: old tool outputs become placeholders at assembly.
* `runner` — `Compaction`, compaction of a stored session; `Store.compact` and its
  siblings call it.

The names users need are re-exported here:

    >>> from nexus_store.compaction import CompactionConfig, get_summarizer
    >>> CompactionConfig().keep_recent_tokens
    20000
    >>> get_summarizer("extractive").__class__.__name__
    'ExtractiveSummarizer'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus_store.compaction.extractive import ExtractiveSummarizer
    from nexus_store.compaction.plan import (
        BranchSummaryOutcome,
        CompactionOutcome,
        CompactionPlan,
        ContextItem,
        plan_compaction,
        run_branch_summary,
        run_compaction,
    )
    from nexus_store.compaction.policy import (
        CompactionConfig,
        Degradation,
        LayerConfig,
        SummarizerOptions,
        evaluate_degradation,
        load_config,
        select_layer,
        should_compact,
        trigger_threshold,
    )
    from nexus_store.compaction.prune import (
        PruneConfig,
        PruneResult,
        prune_context,
        tool_output_tokens,
    )
    from nexus_store.compaction.runner import Compaction, CompactResult, resolve_summarizer
    from nexus_store.compaction.stages import StagedSummary, summarize_in_stages
    from nexus_store.compaction.summarizer import HttpSummarizer, Summarizer, get_summarizer


# Imported on first use (PEP 562): `from nexus_store.compaction.policy import ...` (the
# store's status reads the policy) does not pay for the planner, the summarizers and
# their pydantic models (issue 17: start-up).
_LAZY = {
    "ExtractiveSummarizer": "nexus_store.compaction.extractive",
    "BranchSummaryOutcome": "nexus_store.compaction.plan",
    "CompactionOutcome": "nexus_store.compaction.plan",
    "CompactionPlan": "nexus_store.compaction.plan",
    "ContextItem": "nexus_store.compaction.plan",
    "plan_compaction": "nexus_store.compaction.plan",
    "run_branch_summary": "nexus_store.compaction.plan",
    "run_compaction": "nexus_store.compaction.plan",
    "CompactionConfig": "nexus_store.compaction.policy",
    "Degradation": "nexus_store.compaction.policy",
    "LayerConfig": "nexus_store.compaction.policy",
    "SummarizerOptions": "nexus_store.compaction.policy",
    "evaluate_degradation": "nexus_store.compaction.policy",
    "load_config": "nexus_store.compaction.policy",
    "select_layer": "nexus_store.compaction.policy",
    "should_compact": "nexus_store.compaction.policy",
    "trigger_threshold": "nexus_store.compaction.policy",
    "PruneConfig": "nexus_store.compaction.prune",
    "PruneResult": "nexus_store.compaction.prune",
    "prune_context": "nexus_store.compaction.prune",
    "tool_output_tokens": "nexus_store.compaction.prune",
    "Compaction": "nexus_store.compaction.runner",
    "CompactResult": "nexus_store.compaction.runner",
    "resolve_summarizer": "nexus_store.compaction.runner",
    "StagedSummary": "nexus_store.compaction.stages",
    "summarize_in_stages": "nexus_store.compaction.stages",
    "HttpSummarizer": "nexus_store.compaction.summarizer",
    "Summarizer": "nexus_store.compaction.summarizer",
    "get_summarizer": "nexus_store.compaction.summarizer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nexus_store.compaction' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BranchSummaryOutcome",
    "CompactResult",
    "Compaction",
    "CompactionConfig",
    "CompactionOutcome",
    "CompactionPlan",
    "ContextItem",
    "Degradation",
    "ExtractiveSummarizer",
    "HttpSummarizer",
    "LayerConfig",
    "PruneConfig",
    "PruneResult",
    "StagedSummary",
    "Summarizer",
    "SummarizerOptions",
    "evaluate_degradation",
    "get_summarizer",
    "load_config",
    "plan_compaction",
    "prune_context",
    "resolve_summarizer",
    "run_branch_summary",
    "run_compaction",
    "select_layer",
    "should_compact",
    "summarize_in_stages",
    "tool_output_tokens",
    "trigger_threshold",
]
