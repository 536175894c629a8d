"""``nexus-store context``: show a leaf's context, and its status."""

from __future__ import annotations

import click

from nexus_store.cli._common import echo_json, json_option, open_store
from nexus_store.cli.views import message_preview
from nexus_store.policy_basics import DEFAULT_WINDOW

__all__ = ["context"]


@click.group()
def context() -> None:
    """Inspect the context a model sees for a leaf of a session."""


@context.command("show")
@click.argument("session")
@click.option("--leaf", help="Turn id of the leaf (default: the session's active leaf).")
@click.option(
    "--render",
    type=click.Choice(["openai", "anthropic"]),
    help="Print the provider rendering (chat messages for that API) as JSON.",
)
@click.option(
    "--thinking",
    type=click.Choice(["drop", "keep"]),
    default="drop",
    show_default=True,
    help="With --render: drop thinking blocks or keep them.",
)
@json_option
@click.pass_context
def show(
    ctx: click.Context,
    session: str,
    leaf: str | None,
    render: str | None,
    thinking: str,
    as_json: bool,
) -> None:
    """Show the context of SESSION's active leaf (or --leaf) as pi assembles it.

    The latest compaction on the path becomes a summary message, followed by
    the kept turns and the turns after it. --json prints {"messages", "model",
    "thinking_level", "tokens"}.

    \b
    Example:
        nexus-store context show latest
        nexus-store context show latest --leaf 3f2a9c01 --json
        nexus-store context show latest --render anthropic --thinking keep
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    result = store.context(info.id, leaf)
    if render:
        echo_json(result.render(render, thinking=thinking))  # type: ignore[arg-type]
        return
    if as_json:
        echo_json(result.to_json_dict())
        return
    model = result.model or {}
    click.echo(
        f"session {info.id}  leaf {result.leaf_id}  {len(result.messages)} messages, "
        f"{result.tokens:,} tokens  model {model.get('provider', '-')}/{model.get('modelId', '-')}  "
        f"thinking {result.thinking_level}"
    )
    for turn_id, message in zip(result.turn_ids, result.messages, strict=True):
        click.echo(f"{turn_id}  {message_preview(message, 100)}")


@context.command("status")
@click.argument("session")
@click.option("--leaf", help="Turn id of the leaf (default: the session's active leaf).")
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=DEFAULT_WINDOW,
    show_default=True,
    help="The model's context window in tokens.",
)
@json_option
@click.pass_context
def status(ctx: click.Context, session: str, leaf: str | None, window: int, as_json: bool) -> None:
    """Show how full SESSION's context is and how often its path was compacted.

    Tokens against the window, compactions on the path to the leaf, the last
    compaction, and the degradation risk that repeated compaction brings.

    \b
    Example:
        nexus-store context status latest
        nexus-store context status latest --window 128000 --json
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    st = store.status(info.id, leaf, window=window)
    if as_json:
        echo_json(st.model_dump())
        return
    click.echo(f"Context status  session {info.id}  leaf {st.leaf_id}")
    click.echo(f"Tokens:          {st.tokens:,} / {st.window:,} ({st.percent:.1f}%)")
    click.echo(f"Auto-compact at: {st.threshold:,} tokens")
    click.echo(f"Compactions:     {st.compactions} on this path")
    last = st.last_compaction
    if last:
        before = f"{last['tokens_before']:,}" if isinstance(last["tokens_before"], int) else "?"
        after = f"{last['tokens_after']:,}" if isinstance(last["tokens_after"], int) else "?"
        how = ", ".join(str(v) for v in (last["trigger"], last["layer"]) if v)
        click.echo(f"Last compaction: {last['id']} at {last['timestamp']} ({how or 'no trigger recorded'}) {before} → {after} tokens")
    click.echo(f"Degradation:     {st.risk} — {st.recommendation}")
