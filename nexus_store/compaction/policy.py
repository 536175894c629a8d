"""When to prune, compact and flush: configuration and the pure decisions built on it.

`CompactionConfig` gathers every number the compaction machinery uses. It is read
from a TOML file, then ``NEXUS_*`` environment variables, then explicit overrides
(later wins), and validated once with pydantic; an invalid value is a `NexusError`
naming the field and what is allowed.

The decisions are plain functions of a token count and the config:

* `should_compact` — seed 003's trigger: ``tokens >= context_window -
  reserve_tokens_floor - soft_threshold_tokens`` (176,000 with the defaults).
* `select_layer` — seed 002's layers: *prune* at 80% of the window when tool output
  exceeds 50K tokens (a mechanical summary, no LLM), *summarize* at 88% (keeping the
  recent 25K), *full* at 95% (keeping 15K). The most severe layer whose trigger is
  reached is chosen (the seed's loop returned the first one reached, so a context
  at 96% with large tool outputs would only ever be pruned).
* `evaluate_degradation` / `should_block_auto_compaction` — risk from the number
  of compactions on the leaf's path and from how full the context is (past the
  window, past the trigger, past the lowest layer), and the cap on automatic
  compactions.
* `should_flush` / `record_flush` — the pre-compaction memory flush runs once per
  compaction epoch (seed 003's ``memoryFlushCompactionCount``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from nexus_store.compaction.prune import PruneConfig
from nexus_store.degradation import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_LAYER_TRIGGERS,
    DEFAULT_MAX_AUTO_COMPACTIONS,
    DEFAULT_RESERVE_TOKENS_FLOOR,
    DEFAULT_SOFT_THRESHOLD_TOKENS,
    DEFAULT_WARN_AT_COMPACTION,
    RiskLevel,
    RiskLimits,
    assess,
    percent_threshold,
)
from nexus_store.errors import NexusError

__all__ = [
    "CONFIG_ENV",
    "ENV_VARS",
    "CompactionConfig",
    "Degradation",
    "Layer",
    "LayerConfig",
    "LayerName",
    "SummarizerOptions",
    "evaluate_degradation",
    "layer_threshold",
    "load_config",
    "record_flush",
    "select_layer",
    "should_block_auto_compaction",
    "should_compact",
    "should_flush",
    "trigger_threshold",
]

LayerName = Literal["prune", "summarize", "full"]

CONFIG_ENV = "NEXUS_COMPACTION_CONFIG"
"""Environment variable naming the TOML file `load_config` reads when no path is given."""


class LayerConfig(BaseModel):
    """One compaction layer.

    Attributes:
        name: ``prune``, ``summarize`` or ``full``.
        trigger_percent: Share of the context window (0-100] at which the layer applies.
        protect_recent_tokens: Recent tokens the layer keeps verbatim.
        min_tool_output_tokens: If set, the layer applies only when tool output
            exceeds this many tokens (strictly).
        use_llm: Whether the layer calls the configured summarizer; the prune layer
            writes a mechanical summary instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: LayerName
    trigger_percent: float = Field(gt=0, le=100)
    protect_recent_tokens: int = Field(ge=0)
    min_tool_output_tokens: int | None = Field(default=None, ge=0)
    use_llm: bool = True


DEFAULT_LAYERS = (
    LayerConfig(
        name="prune",
        trigger_percent=DEFAULT_LAYER_TRIGGERS["prune"],
        protect_recent_tokens=40_000,
        min_tool_output_tokens=50_000,
        use_llm=False,
    ),
    LayerConfig(
        name="summarize",
        trigger_percent=DEFAULT_LAYER_TRIGGERS["summarize"],
        protect_recent_tokens=25_000,
    ),
    LayerConfig(
        name="full", trigger_percent=DEFAULT_LAYER_TRIGGERS["full"], protect_recent_tokens=15_000
    ),
)


Layer = LayerConfig
"""Alias: what `select_layer` returns."""


class SummarizerOptions(BaseModel):
    """Which summarizer compaction uses (``[compaction.summarizer]``).

    The API key is deliberately not a setting: it comes from the environment
    (``NEXUS_SUMMARIZER_API_KEY``, ``OPENROUTER_API_KEY``, ``OPENAI_API_KEY``) or an
    argument, so it is never written into a config file or shown with the config.

    Attributes:
        kind: ``extractive`` (offline, the default) or ``openai`` (any
            OpenAI-compatible chat-completions endpoint).
        base_url: Endpoint root, e.g. ``https://openrouter.ai/api/v1``.
        model: Model id.
        timeout: Seconds to wait for a response.
        max_retries: Retries on 429/5xx/connection errors.
        max_tokens: Output budget of one summary.
        temperature: Sampling temperature.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: Literal["extractive", "openai"] = "extractive"
    base_url: str | None = None
    model: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_tokens: int = Field(default=4096, gt=0)
    temperature: float | None = Field(default=0.2, ge=0, le=2)


class CompactionConfig(BaseModel):
    """Every setting of pruning and compaction, validated.

    Attributes:
        context_window: The model's context window in tokens.
        reserve_tokens_floor: Hard reserve kept free for the summary and the reply.
        soft_threshold_tokens: Extra headroom so the memory flush can run first.
        keep_recent_tokens: Recent tokens a manual compaction keeps verbatim.
        max_chunk_share: Share of the window one summarizer call may receive.
        summary_parts: Stretches a large span is split into before merging.
        auto_enabled: Whether automatic compaction may run at all.
        layers: The layered triggers, ordered by ``trigger_percent``.
        warn_at_compaction: Compactions on a path from which risk is "high".
        max_auto_compactions: Compactions from which risk is "critical" and
            automatic compaction stops.
        prune: The prune view's settings.
        summarizer: The summarizer's settings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, gt=0)
    reserve_tokens_floor: int = Field(default=DEFAULT_RESERVE_TOKENS_FLOOR, ge=0)
    soft_threshold_tokens: int = Field(default=DEFAULT_SOFT_THRESHOLD_TOKENS, ge=0)
    keep_recent_tokens: int = Field(default=20_000, ge=0)
    max_chunk_share: float = Field(default=0.4, gt=0, le=1)
    summary_parts: int = Field(default=2, ge=1, le=16)
    auto_enabled: bool = True
    layers: tuple[LayerConfig, ...] = DEFAULT_LAYERS
    warn_at_compaction: int = Field(default=DEFAULT_WARN_AT_COMPACTION, ge=1)
    max_auto_compactions: int = Field(default=DEFAULT_MAX_AUTO_COMPACTIONS, ge=1)
    prune: PruneConfig = PruneConfig()
    summarizer: SummarizerOptions = SummarizerOptions()

    @model_validator(mode="after")
    def _check(self) -> CompactionConfig:
        if self.reserve_tokens_floor + self.soft_threshold_tokens >= self.context_window:
            raise ValueError(
                "reserve_tokens_floor + soft_threshold_tokens "
                f"({self.reserve_tokens_floor} + {self.soft_threshold_tokens}) must be below "
                f"context_window ({self.context_window})"
            )
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"layers must have distinct names (got {names})")
        percents = [layer.trigger_percent for layer in self.layers]
        if percents != sorted(percents):
            raise ValueError(f"layers must be ordered by trigger_percent (got {percents})")
        return self

    @property
    def risk_limits(self) -> RiskLimits:
        """The limits `nexus_store.degradation.assess` rates a context against."""
        return RiskLimits(
            context_window=self.context_window,
            reserve_tokens_floor=self.reserve_tokens_floor,
            soft_threshold_tokens=self.soft_threshold_tokens,
            warn_at_compaction=self.warn_at_compaction,
            max_auto_compactions=self.max_auto_compactions,
            layer_triggers=tuple(layer.trigger_percent for layer in self.layers),
        )

    @property
    def max_chunk_tokens(self) -> int:
        """Token budget of one summarizer call: ``max_chunk_share`` of the window."""
        return max(1, int(self.context_window * self.max_chunk_share))

    def layer(self, name: LayerName) -> LayerConfig | None:
        """Return the layer called ``name``, or None if it is not configured."""
        return next((layer for layer in self.layers if layer.name == name), None)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> CompactionConfig:
        """Shorthand for `load_config`."""
        return load_config(path, env=env, overrides=overrides)


# -- loading -----------------------------------------------------------------------

ENV_VARS: dict[str, tuple[str, ...]] = {
    "NEXUS_CONTEXT_WINDOW": ("context_window",),
    "NEXUS_RESERVE_TOKENS_FLOOR": ("reserve_tokens_floor",),
    "NEXUS_SOFT_THRESHOLD_TOKENS": ("soft_threshold_tokens",),
    "NEXUS_KEEP_RECENT_TOKENS": ("keep_recent_tokens",),
    "NEXUS_MAX_CHUNK_SHARE": ("max_chunk_share",),
    "NEXUS_SUMMARY_PARTS": ("summary_parts",),
    "NEXUS_AUTO_COMPACT": ("auto_enabled",),
    "NEXUS_WARN_AT_COMPACTION": ("warn_at_compaction",),
    "NEXUS_MAX_AUTO_COMPACTIONS": ("max_auto_compactions",),
    "NEXUS_PRUNE": ("prune", "enabled"),
    "NEXUS_PRUNE_PROTECT_TOKENS": ("prune", "protect_tokens"),
    "NEXUS_PRUNE_MINIMUM_TOKENS": ("prune", "minimum_tokens"),
    "NEXUS_PRUNE_PROTECTED_TOOLS": ("prune", "protected_tools"),
    "NEXUS_PRUNE_PROTECT_USER_TURNS": ("prune", "protect_user_turns"),
    "NEXUS_SUMMARIZER": ("summarizer", "kind"),
    "NEXUS_SUMMARIZER_BASE_URL": ("summarizer", "base_url"),
    "NEXUS_SUMMARIZER_MODEL": ("summarizer", "model"),
    "NEXUS_SUMMARIZER_TIMEOUT": ("summarizer", "timeout"),
    "NEXUS_SUMMARIZER_MAX_RETRIES": ("summarizer", "max_retries"),
    "NEXUS_SUMMARIZER_MAX_TOKENS": ("summarizer", "max_tokens"),
}
"""Environment variables `load_config` reads, and the setting each one sets."""


def _set(target: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = {}
            target[key] = child
        target = child
    target[keys[-1]] = value


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if value is None:
            continue  # an unset CLI option does not erase a configured value
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        elif isinstance(value, Mapping):
            out[key] = _deep_merge({}, value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise NexusError(
            f"compaction config file {str(path)!r} does not exist; check the path "
            f"(or unset {CONFIG_ENV})"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise NexusError(f"compaction config file {str(path)!r} is not valid TOML: {err}") from None
    section = data.get("compaction", data)
    if not isinstance(section, dict):
        raise NexusError(f"[compaction] in {str(path)!r} must be a table")
    return section


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, keys in ENV_VARS.items():
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        value: Any = raw.strip()
        if keys == ("prune", "protected_tools"):
            value = [t.strip() for t in raw.split(",") if t.strip()]
        _set(values, keys, value)
    return values


def _describe(err: ValidationError) -> str:
    problems = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        problems.append(f"{where}: {item['msg']} (got {item.get('input')!r})")
    return "; ".join(problems)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> CompactionConfig:
    """Build the configuration from a TOML file, the environment and overrides.

    Precedence, lowest first: defaults, the TOML file (its ``[compaction]`` table,
    or the whole document if it has none), ``NEXUS_*`` variables (`ENV_VARS`), then
    ``overrides`` (nested mappings; None values are ignored).

    Args:
        path: TOML file; defaults to ``$NEXUS_COMPACTION_CONFIG`` if set, else none.
        env: Environment to read (default ``os.environ``).
        overrides: Explicit settings, e.g. ``{"keep_recent_tokens": 30000}``.

    Returns:
        The validated configuration.

    Raises:
        NexusError: If the file is missing or malformed, or a value is invalid.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    data: dict[str, Any] = {}
    source = "defaults"
    if path is None and environ.get(CONFIG_ENV):
        path = environ[CONFIG_ENV]
    if path is not None:
        data = _deep_merge(data, _read_toml(Path(path)))
        source = f"{os.fspath(path)!r}"
    env_values = _from_env(environ)
    if env_values:
        data = _deep_merge(data, env_values)
        source += " + environment"
    if overrides:
        data = _deep_merge(data, overrides)
        source += " + options"
    try:
        return CompactionConfig.model_validate(data)
    except ValidationError as err:
        raise NexusError(f"invalid compaction config ({source}): {_describe(err)}") from None


# -- decisions ---------------------------------------------------------------------


def trigger_threshold(cfg: CompactionConfig) -> int:
    """Tokens at which compaction triggers: window - reserve floor - soft threshold.

    Args:
        cfg: The configuration.

    Returns:
        176,000 with the defaults.

    Example:
        >>> trigger_threshold(CompactionConfig())
        176000
        >>> trigger_threshold(CompactionConfig(context_window=32_000))
        8000
    """
    return cfg.context_window - cfg.reserve_tokens_floor - cfg.soft_threshold_tokens


def should_compact(tokens: int, cfg: CompactionConfig) -> bool:
    """Whether a context of ``tokens`` tokens has reached the trigger (``>=``).

    Args:
        tokens: Current context tokens.
        cfg: The configuration.

    Returns:
        True from `trigger_threshold` upwards.

    Example:
        >>> should_compact(176_000, CompactionConfig()), should_compact(175_999, CompactionConfig())
        (True, False)
    """
    return tokens >= trigger_threshold(cfg)


def layer_threshold(layer: LayerConfig, context_window: int) -> int:
    """The smallest token count at which ``layer`` triggers, computed exactly.

    Args:
        layer: The layer.
        context_window: The window in tokens.

    Returns:
        ``ceil(context_window * trigger_percent / 100)`` without float rounding.
    """
    return percent_threshold(layer.trigger_percent, context_window)


def select_layer(tokens: int, tool_output_tokens: int, cfg: CompactionConfig) -> LayerConfig | None:
    """Choose the most severe layer whose trigger is reached, or None.

    Args:
        tokens: Current context tokens.
        tool_output_tokens: Tokens of tool results in the context.
        cfg: The configuration.

    Returns:
        The layer to run, or None when no layer applies.
    """
    for layer in sorted(cfg.layers, key=lambda x: x.trigger_percent, reverse=True):
        if tokens < layer_threshold(layer, cfg.context_window):
            continue
        if layer.min_tool_output_tokens is not None and not (
            tool_output_tokens > layer.min_tool_output_tokens
        ):
            continue
        return layer
    return None


class Degradation(BaseModel):
    """How much a path has lost to repeated compaction.

    Attributes:
        compaction_count: Compactions on the leaf's path.
        risk: ``low``, ``medium``, ``high`` or ``critical``.
        information_loss_estimate: Rough percentage lost (10 per compaction, at most 90).
        recommendation: What to do, in one or a few lines.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    compaction_count: int
    risk: RiskLevel
    information_loss_estimate: int
    recommendation: str


def evaluate_degradation(
    compaction_count: int,
    cfg: CompactionConfig,
    *,
    tokens: int | None = None,
    window: int | None = None,
) -> Degradation:
    """Rate the risk of a leaf's context: how often it was compacted, and how full it is.

    The rules (by compaction count and by fill level; the higher risk wins) are
    `nexus_store.degradation.assess`, on ``cfg.risk_limits``; its docstring states them.

    Args:
        compaction_count: Compactions on the path of the leaf.
        cfg: The configuration.
        tokens: Tokens in the leaf's context; None to rate the compactions only.
        window: The context window to measure against (default: the config's).

    Returns:
        A `Degradation`.
    """
    found = assess(compaction_count, cfg.risk_limits, tokens=tokens, window=window)
    return Degradation(
        compaction_count=found.compaction_count,
        risk=found.risk,
        information_loss_estimate=found.information_loss_estimate,
        recommendation=found.recommendation,
    )


def should_block_auto_compaction(compaction_count: int, cfg: CompactionConfig) -> bool:
    """Whether automatic compaction must not run (disabled, or the cap is reached).

    Args:
        compaction_count: Compactions on the path of the leaf.
        cfg: The configuration.

    Returns:
        True when ``auto_enabled`` is off or ``compaction_count >= max_auto_compactions``.
    """
    return not cfg.auto_enabled or compaction_count >= cfg.max_auto_compactions


def should_flush(flush_epoch: int | None, compaction_count: int) -> bool:
    """Whether the pre-compaction memory flush should run in this compaction epoch.

    The epoch is the number of compactions so far. ``flush_epoch`` is the epoch of
    the last flush as persisted on the session (None, or a negative number, when
    never flushed), so the flush runs once per epoch however often the trigger fires.

    Args:
        flush_epoch: Stored epoch of the last flush, or None.
        compaction_count: Current compaction count (the current epoch).

    Returns:
        True when this epoch has not been flushed yet.
    """
    return flush_epoch is None or flush_epoch < compaction_count


def record_flush(compaction_count: int) -> int:
    """The value to persist as ``flush_epoch`` after flushing in this epoch.

    Args:
        compaction_count: Current compaction count.

    Returns:
        ``compaction_count``; with it stored, `should_flush` is False until the next compaction.
    """
    return compaction_count
