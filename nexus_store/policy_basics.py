"""Defaults shared by status and compaction: the window, the trigger formula, degradation.

The trigger formula is seed 003's: compact when tokens >= context_window -
reserve_tokens_floor - soft_threshold_tokens (defaults 200000 - 20000 - 4000). The
degradation levels are seed 002's ``evaluateDegradation``: 5 or more compactions
on a path is critical, 3 or more high, 2 medium.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_RESERVE_FLOOR",
    "DEFAULT_SOFT_THRESHOLD",
    "DEFAULT_WINDOW",
    "degradation",
    "trigger_threshold",
]

DEFAULT_WINDOW = 200_000
DEFAULT_RESERVE_FLOOR = 20_000
DEFAULT_SOFT_THRESHOLD = 4_000


def trigger_threshold(
    window: int,
    reserve_tokens_floor: int = DEFAULT_RESERVE_FLOOR,
    soft_threshold_tokens: int = DEFAULT_SOFT_THRESHOLD,
) -> int:
    """Token count at which automatic compaction triggers (never below zero)."""
    return max(0, window - reserve_tokens_floor - soft_threshold_tokens)


def degradation(compactions: int, *, soft_limit: int = 3, hard_limit: int = 5) -> tuple[str, str]:
    """Risk level and recommendation for a path compacted ``compactions`` times."""
    if compactions >= hard_limit:
        return (
            "critical",
            f"{compactions} compactions: context quality is significantly degraded; export the "
            "session (context export), start a fresh one and import what matters",
        )
    if compactions >= soft_limit:
        return (
            "high",
            f"compacted {compactions} times: quality may be degrading; consider a fresh session",
        )
    if compactions >= 2:
        return ("medium", "compacted twice: watch for lost details")
    return ("low", "context quality is healthy")
