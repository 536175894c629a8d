"""How much a leaf's context is at risk: the rules, on plain numbers.

A context is at risk when it was compacted often (detail is lost each time) and when
it is full (past the lowest compaction layer, past the auto-compaction trigger, past
the window). `assess` rates both and says what to do. The numbers it needs are
`RiskLimits`; their defaults are the defaults of `CompactionConfig`, which takes them
from here.

This module imports nothing but the standard library: ``nexus-store context status``
rates a context with the default limits without importing pydantic or the
compaction package (issue 17: start-up). `nexus_store.compaction.policy` validates
configured limits with pydantic and calls the same rules
(`~nexus_store.compaction.policy.evaluate_degradation`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_LAYER_TRIGGERS",
    "DEFAULT_MAX_AUTO_COMPACTIONS",
    "DEFAULT_RESERVE_TOKENS_FLOOR",
    "DEFAULT_SOFT_THRESHOLD_TOKENS",
    "DEFAULT_WARN_AT_COMPACTION",
    "Assessment",
    "RiskLevel",
    "RiskLimits",
    "assess",
    "percent_threshold",
]

RiskLevel = Literal["low", "medium", "high", "critical"]

DEFAULT_CONTEXT_WINDOW = 200_000
"""The model's context window in tokens."""
DEFAULT_RESERVE_TOKENS_FLOOR = 20_000
"""Tokens kept free for the summary and the reply."""
DEFAULT_SOFT_THRESHOLD_TOKENS = 4_000
"""Extra headroom so the memory flush can run before compaction."""
DEFAULT_WARN_AT_COMPACTION = 3
"""Compactions on a path from which the risk is high."""
DEFAULT_MAX_AUTO_COMPACTIONS = 5
"""Compactions on a path from which the risk is critical (and auto-compaction stops)."""
DEFAULT_LAYER_TRIGGERS: dict[str, float] = {"prune": 80, "summarize": 88, "full": 95}
"""Each default compaction layer's trigger, in percent of the window."""

_RISKS: tuple[RiskLevel, ...] = ("low", "medium", "high", "critical")


class RiskLimits(NamedTuple):
    """The numbers `assess` rates a context against (`CompactionConfig.risk_limits`).

    Attributes:
        context_window: The window the configuration is written for.
        reserve_tokens_floor: Tokens kept free for the summary and the reply.
        soft_threshold_tokens: Extra headroom before the trigger.
        warn_at_compaction: Compactions from which the risk is high.
        max_auto_compactions: Compactions from which the risk is critical.
        layer_triggers: Each compaction layer's trigger, in percent of the window.
    """

    context_window: int = DEFAULT_CONTEXT_WINDOW
    reserve_tokens_floor: int = DEFAULT_RESERVE_TOKENS_FLOOR
    soft_threshold_tokens: int = DEFAULT_SOFT_THRESHOLD_TOKENS
    warn_at_compaction: int = DEFAULT_WARN_AT_COMPACTION
    max_auto_compactions: int = DEFAULT_MAX_AUTO_COMPACTIONS
    layer_triggers: tuple[float, ...] = tuple(DEFAULT_LAYER_TRIGGERS.values())

    def threshold(self, window: int) -> int:
        """Tokens at which auto-compaction triggers in ``window``: window - reserve - soft.

        Example:
            >>> RiskLimits().threshold(200_000)
            176000
        """
        return max(0, window - self.reserve_tokens_floor - self.soft_threshold_tokens)


class Assessment(NamedTuple):
    """What `assess` found (the fields of `nexus_store.compaction.policy.Degradation`).

    Attributes:
        compaction_count: Compactions on the leaf's path.
        risk: ``low``, ``medium``, ``high`` or ``critical``.
        information_loss_estimate: Rough percentage lost (10 per compaction, at most 90).
        recommendation: What to do, in one or a few lines.
    """

    compaction_count: int
    risk: RiskLevel
    information_loss_estimate: int
    recommendation: str


def percent_threshold(trigger_percent: float, context_window: int) -> int:
    """The smallest token count at ``trigger_percent`` of the window, computed exactly.

    The percent is taken as the decimal it is written as (87.3 is 873/10, not the
    binary float nearest to it), in integers: `fractions` would cost the status
    command a few milliseconds of imports.

    Returns:
        ``ceil(context_window * trigger_percent / 100)`` without float rounding.

    Example:
        >>> percent_threshold(88, 200_000), percent_threshold(0.1, 10)
        (176000, 1)
        >>> percent_threshold(87.3, 1000)  # 872.9999... with floats
        873
    """
    mantissa, _, exponent = repr(float(trigger_percent)).partition("e")  # "87.3", "1e-05"
    whole, _, decimals = mantissa.partition(".")
    numerator, shift = int(whole + decimals), len(decimals) - int(exponent or 0)
    scale = int(10 ** abs(shift))
    numerator, denominator = (numerator, 100 * scale) if shift >= 0 else (numerator * scale, 100)
    return -(-context_window * numerator // denominator)


def assess(
    compaction_count: int,
    limits: RiskLimits,
    *,
    tokens: int | None = None,
    window: int | None = None,
) -> Assessment:
    """Rate the risk of a leaf's context: how often it was compacted, and how full it is.

    From the compaction count: critical from ``max_auto_compactions``, high from
    ``warn_at_compaction``, medium from one below the warning (at least 1), else low
    (seed 002's guard with its limits taken from the config). From the fill level,
    when ``tokens`` is given (issue 15: a context at 104.5% was called healthy):
    critical at or over the window (the model cannot take it), high from the
    trigger formula's threshold (``window - reserve_tokens_floor -
    soft_threshold_tokens``: compaction is due), medium from the lowest layer's
    trigger. The higher of the two risks wins, and the recommendation says both.

    Args:
        compaction_count: Compactions on the path of the leaf.
        limits: The limits to rate against.
        tokens: Tokens in the leaf's context; None to rate the compactions only.
        window: The context window to measure against (default: the limits').

    Returns:
        An `Assessment`.

    Example:
        >>> assess(0, RiskLimits(), tokens=1_000).risk
        'low'
        >>> assess(3, RiskLimits()).risk, assess(0, RiskLimits(), tokens=200_000).risk
        ('high', 'critical')
    """
    count = max(0, compaction_count)
    loss = min(90, count * 10)
    medium_from = max(1, limits.warn_at_compaction - 1)
    risk: RiskLevel
    if count >= limits.max_auto_compactions:
        risk = "critical"
        advice = (
            f"Critical: compacted {count} times; the context has lost much of its detail and "
            "automatic compaction is stopped. Export the session "
            "(nexus-store context export SESSION backup.json) and start a fresh one."
        )
    elif count >= limits.warn_at_compaction:
        risk = "high"
        advice = (
            f"Compacted {count} times; quality may be degrading. Consider exporting the session "
            "and starting a fresh one."
        )
    elif count >= medium_from:
        risk = "medium"
        advice = f"Compacted {count} time{'s' if count != 1 else ''}; context is still healthy."
    else:
        risk = "low"
        advice = "Context quality is healthy."
    if tokens is not None:
        fill_risk, fill_advice = _fill_level(
            tokens, limits, limits.context_window if window is None else window
        )
        if fill_risk != "low":
            advice = fill_advice if risk == "low" else f"{fill_advice} {advice}"
            risk = max(risk, fill_risk, key=_RISKS.index)
    return Assessment(count, risk, loss, advice)


def _fill_level(tokens: int, limits: RiskLimits, window: int) -> tuple[RiskLevel, str]:
    """The risk and advice of a context of ``tokens`` tokens in ``window``."""
    threshold = limits.threshold(window)
    percent = tokens / window * 100
    if tokens >= window:
        return "critical", (
            f"The context ({tokens:,} tokens, {percent:.1f}%) does not fit the {window:,}-token "
            "window: the model cannot take it. Compact now (nexus-store compact SESSION)."
        )
    if tokens >= threshold:
        return "high", (
            f"The context ({tokens:,} tokens, {percent:.1f}%) is past the auto-compaction "
            f"trigger ({threshold:,} = window - reserve - soft threshold): compact now "
            "(nexus-store compact SESSION)."
        )
    lowest = min((percent_threshold(p, window) for p in limits.layer_triggers), default=threshold)
    if tokens >= lowest:
        return "medium", (
            f"The context ({tokens:,} tokens, {percent:.1f}%) is nearing the auto-compaction "
            f"trigger ({threshold:,} tokens)."
        )
    return "low", ""
