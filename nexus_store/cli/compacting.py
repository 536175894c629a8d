"""``nexus-store compact`` and ``navigate``: fold history into a summary, move between branches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import click

from nexus_store.cli._common import echo, echo_json, open_store
from nexus_store.cli.views import message_preview
from nexus_store.compaction.policy import CompactionConfig, load_config

__all__ = ["compact", "navigate"]

_SUMMARIZER_OPTIONS = [
    click.option(
        "--summarizer",
        type=click.Choice(["extractive", "openai"]),
        help="extractive: offline and deterministic (default); openai: any "
        "OpenAI-compatible endpoint (OpenRouter, OpenAI, Ollama, vLLM, llama.cpp).",
    ),
    click.option("--model", help="Model for --summarizer openai (or NEXUS_SUMMARIZER_MODEL)."),
    click.option(
        "--base-url",
        help="Endpoint for --summarizer openai (or NEXUS_SUMMARIZER_BASE_URL); "
        "the key comes from NEXUS_SUMMARIZER_API_KEY, OPENROUTER_API_KEY or OPENAI_API_KEY.",
    ),
    click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Compaction settings (TOML); NEXUS_* variables and options override it.",
    ),
]


F = TypeVar("F", bound=Callable[..., Any])


def _with_options(func: F) -> F:
    for option in reversed(_SUMMARIZER_OPTIONS):
        func = option(func)
    return func


def _config(
    config_path: Path | None,
    summarizer: str | None,
    model: str | None,
    base_url: str | None,
    keep: int | None = None,
) -> CompactionConfig:
    overrides: dict[str, object] = {}
    summarizer_overrides = {
        k: v for k, v in (("kind", summarizer), ("model", model), ("base_url", base_url)) if v
    }
    if summarizer_overrides:
        overrides["summarizer"] = summarizer_overrides
    if keep is not None:
        overrides["keep_recent_tokens"] = keep
    return load_config(config_path, overrides=overrides)


@click.command()
@click.argument("session")
@click.option("--leaf", help="Compact the context of this turn (default: the active leaf).")
@click.option("--focus", help="What the summary must preserve (a custom instruction).")
@click.option(
    "--dry-run", is_flag=True, help="Show what would be summarized and the savings; write nothing."
)
@click.option(
    "--keep-recent-tokens",
    type=click.IntRange(min=0),
    help="Tokens of recent context kept verbatim (default 20000, or the config's).",
)
@click.option(
    "--layer",
    type=click.Choice(["summarize", "full", "prune"]),
    default="summarize",
    show_default=True,
    help="prune writes a mechanical summary without any model.",
)
@_with_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def compact(
    ctx: click.Context,
    session: str,
    leaf: str | None,
    focus: str | None,
    dry_run: bool,
    keep_recent_tokens: int | None,
    layer: str,
    summarizer: str | None,
    model: str | None,
    base_url: str | None,
    config_path: Path | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Summarize the older part of SESSION's context into a compaction turn.

    The recent --keep-recent-tokens stay verbatim; the cut never separates a
    tool call from its results. The compaction is written under the leaf and
    becomes the active leaf. No turn is deleted: every earlier leaf keeps its
    context, and the summarized turns stay queryable.

    \b
    Example:
        nexus-store compact latest --dry-run
        nexus-store compact latest --focus "the timezone fix" --keep-recent-tokens 0 --yes
        nexus-store compact latest --summarizer openai \\
            --base-url http://127.0.0.1:11434/v1 --model llama3.1
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    cfg = _config(config_path, summarizer, model, base_url, keep_recent_tokens)
    plan = store.compact(
        info.id,
        leaf_id=leaf,
        config=cfg,
        dry_run=True,
        layer=cast(Literal["prune", "summarize", "full"], layer),
        keep_recent_tokens=keep_recent_tokens,
    ).plan
    saved = plan.tokens_before - plan.estimated_tokens_after
    lines: list[str] = []
    if dry_run or not as_json:
        lines = [
            f"Current context:            {plan.tokens_before:,} tokens",
            f"Estimated after compaction: {plan.estimated_tokens_after:,} tokens",
            f"Potential savings:          {saved:,} tokens",
            f"Messages to summarize:      {plan.messages_compacted}"
            + (
                " (cut inside a turn: its start is summarized separately)"
                if plan.is_split_turn
                else ""
            ),
            f"First kept turn:            {plan.first_kept_turn_id or '(none)'}",
        ]
    if dry_run:
        if as_json:
            echo_json(plan.model_dump())
        else:
            echo("\n".join(lines))
            for m in [*plan.to_summarize, *plan.split_turn_prefix][:20]:
                echo("  - " + message_preview(m, 90))
        return
    if plan.is_empty:
        raise click.ClickException(
            f"nothing to compact: the context ({plan.tokens_before:,} tokens) fits in the kept "
            "part; "
            "lower --keep-recent-tokens to compact anyway"
        )
    if not as_json:
        echo("\n".join(lines))
    if not yes and not click.confirm("Proceed with compaction?", default=False, err=True):
        echo("Compaction cancelled; nothing was written.", err=True)
        return
    result = store.compact(
        info.id,
        leaf_id=leaf,
        config=cfg,
        instructions=focus,
        layer=layer,  # type: ignore[arg-type]
        keep_recent_tokens=keep_recent_tokens,
    )
    assert result.turn is not None and result.outcome is not None
    if as_json:
        echo_json(
            {
                "turn": result.turn.model_dump(),
                "plan": plan.model_dump(),
                "partial": result.outcome.partial,
                "omitted": result.outcome.omitted,
            }
        )
        return
    after = store.context(info.id).tokens
    echo(
        f"✓ Compacted {plan.messages_compacted} messages into turn {result.turn.id}: "
        f"{plan.tokens_before:,} → {after:,} tokens"
    )
    for note in result.outcome.omitted:
        echo(f"  note: {note}", err=True)


@click.command()
@click.argument("session")
@click.argument("turn", required=False)
@click.option(
    "--root", is_flag=True, help="Go before the first turn (the next append starts a new root)."
)
@click.option(
    "--summarize", is_flag=True, help="Summarize the branch being left into a branch-summary turn."
)
@click.option("--focus", help="With --summarize: what the summary must preserve.")
@_with_options
@click.option(
    "--json", "as_json", is_flag=True, help="Print the session (and summary turn) as JSON."
)
@click.pass_context
def navigate(
    ctx: click.Context,
    session: str,
    turn: str | None,
    root: bool,
    summarize: bool,
    focus: str | None,
    summarizer: str | None,
    model: str | None,
    base_url: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Move SESSION's active leaf to TURN: the next append branches from there.

    Nothing is deleted. With --summarize, the part of the branch being left
    (from the old leaf back to the common ancestor) is summarized into a
    branch-summary turn at the new position, so the new branch knows what was
    tried.

    \b
    Example:
        nexus-store navigate latest a1000008
        nexus-store navigate latest a1000008 --summarize
        nexus-store navigate latest --root
    """
    if (turn is None) == (not root):
        raise click.UsageError("give a TURN id, or --root")
    store = open_store(ctx)
    info = store.resolve_session(session)
    summary = None
    if summarize:
        cfg = _config(config_path, summarizer, model, base_url)
        summary = store.navigate_with_summary(info.id, turn, config=cfg, instructions=focus)
    else:
        store.navigate(info.id, turn)
    after = store.get_session(info.id)
    if as_json:
        echo_json(
            {
                "session": after.model_dump(),
                "branch_summary": summary.model_dump() if summary else None,
            }
        )
        return
    echo(f"active leaf of {info.id}: {after.active_leaf or '(before the first turn)'}")
    if summary is not None:
        echo(f"branch summary written as turn {summary.id}")
