"""``nexus-store context``: show a leaf's context, and its status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nexus_store.cli._common import echo, echo_json, json_option, open_handle, open_store
from nexus_store.store.status import resolve_session_id, status_figures

if TYPE_CHECKING:
    from nexus_store.models import Turn
    from nexus_store.store import Store

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
@click.option(
    "--prune", is_flag=True, help="Apply the prune view: old tool outputs as placeholders."
)
@json_option
@click.pass_context
def show(
    ctx: click.Context,
    session: str,
    leaf: str | None,
    render: str | None,
    thinking: str,
    prune: bool,
    as_json: bool,
) -> None:
    """Show the context of SESSION's active leaf (or --leaf) as pi assembles it.

    The latest compaction on the path becomes a summary message, followed by
    the kept turns and the turns after it. --json prints {"messages", "model",
    "thinking_level", "tokens"}.

    \b
    Example:
        nexus-store context show latest
        nexus-store context show latest --leaf a100000c --json
        nexus-store context show latest --render anthropic --thinking keep
    """
    from nexus_store.cli.views import message_preview  # not for `status` (issue 17)

    store = open_store(ctx)
    info = store.resolve_session(session)
    result = store.pruned_context(info.id, leaf)[0] if prune else store.context(info.id, leaf)
    if render:
        echo_json(result.render(render, thinking=thinking))  # type: ignore[arg-type]
        return
    if as_json:
        echo_json(result.to_json_dict())
        return
    model = result.model or {}
    echo(
        f"session {info.id}  leaf {result.leaf_id}  {len(result.messages)} messages, "
        f"{result.tokens:,} tokens  "
        f"model {model.get('provider', '-')}/{model.get('modelId', '-')}  "
        f"thinking {result.thinking_level}"
    )
    for turn_id, message in zip(result.turn_ids, result.messages, strict=True):
        echo(f"{turn_id}  {message_preview(message, 100)}")


@context.command("status")
@click.argument("session")
@click.option("--leaf", help="Turn id of the leaf (default: the session's active leaf).")
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=200_000,
    show_default=True,
    help="The model's context window in tokens.",
)
@json_option
@click.pass_context
def status(ctx: click.Context, session: str, leaf: str | None, window: int, as_json: bool) -> None:
    """Show how full SESSION's context is and how often its path was compacted.

    Tokens against the window, compactions on the path to the leaf, the last
    compaction, and the risk: critical when the context does not fit the
    window, high past the auto-compaction trigger (window - reserve - soft
    threshold), medium past the lowest layer, and as high as repeated
    compaction makes it.

    \b
    Example:
        nexus-store context status latest
        nexus-store context status latest --window 128000 --json
    """
    # The figures of `Store.status` from a bare handle: this command imports no
    # pydantic model and not the facade (issue 17: it must start in well under 150 ms).
    handle = open_handle(ctx)
    st = status_figures(handle, resolve_session_id(handle, session), leaf, window=window)
    if as_json:
        echo_json(st.as_dict())
        return
    echo(f"Context status  session {st.session_id}  leaf {st.leaf_id}")
    echo(f"Tokens:          {st.tokens:,} / {st.window:,} ({st.percent:.1f}%)")
    echo(f"Auto-compact at: {st.threshold:,} tokens")
    echo(f"Compactions:     {st.compactions} on this path")
    last = st.last_compaction
    if last:
        before = f"{last['tokens_before']:,}" if isinstance(last["tokens_before"], int) else "?"
        after = f"{last['tokens_after']:,}" if isinstance(last["tokens_after"], int) else "?"
        how = ", ".join(str(v) for v in (last["trigger"], last["layer"]) if v)
        echo(
            f"Last compaction: {last['id']} at {last['timestamp']} "
            f"({how or 'no trigger recorded'}) {before} → {after} tokens"
        )
    echo(f"Degradation:     {st.risk} — {st.recommendation}")


@context.command("history")
@click.argument("session")
@click.option("--leaf", help="Turn id of the leaf (default: the session's active leaf).")
@json_option
@click.pass_context
def history(ctx: click.Context, session: str, leaf: str | None, as_json: bool) -> None:
    """List the compactions on the path to SESSION's leaf, oldest first.

    For each: time, trigger, layer, tokens before → after, messages compacted.
    What a transcript did not record (pi writes no tokens after or message
    count) is derived from the tree: the context just above the compaction and
    at it; such values are marked with *.

    \b
    Example:
        nexus-store context history latest
        nexus-store context history latest --json
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    rows = [_history_row(store, info.id, t) for t in store.compaction_history(info.id, leaf)]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no compactions on this path")
        return
    for n, r in enumerate(rows, 1):

        def shown(key: str, r: dict[str, Any] = r) -> str:
            value = r[key]
            text = f"{value:,}" if isinstance(value, int) else "?"
            return text + ("*" if key in r["derived"] else "")

        echo(
            f"{n}. {r['id']}  {r['timestamp'] or '-'}  {r['trigger'] or '-'}/{r['layer'] or '-'}  "
            f"{shown('tokens_before')} → {shown('tokens_after')} tokens  "
            f"{shown('messages_compacted')} messages"
        )
    if any(r["derived"] for r in rows):
        echo("* derived from the tree (the transcript did not record it)")


def _history_row(store: Store, session_id: str, turn: Turn) -> dict[str, Any]:
    """One compaction's numbers; what its entry lacks is derived from the contexts around it."""
    e = turn.entry
    row: dict[str, Any] = {
        "id": turn.id,
        "timestamp": turn.timestamp,
        "trigger": e.get("trigger"),
        "layer": e.get("layer"),
        "tokens_before": e.get("tokensBefore"),
        "tokens_after": e.get("tokensAfter"),
        "messages_compacted": e.get("messagesCompacted"),
        "first_kept": e.get("firstKeptEntryId"),
        "derived": [],
    }
    keys = ("tokens_before", "tokens_after", "messages_compacted")
    if all(isinstance(row[k], int) for k in keys):
        return row
    # The context the model had just before the compaction, and the one it made.
    before = store.context(session_id, turn.parent_id) if turn.parent_id else None
    after = store.context(session_id, turn.id)
    derived = {
        "tokens_before": before.tokens if before else 0,
        "tokens_after": after.tokens,
        # messages that left the context (the summary message replaces them)
        "messages_compacted": max(
            0, (len(before.messages) if before else 0) - (len(after.messages) - 1)
        ),
    }
    for key in keys:
        if not isinstance(row[key], int):
            row[key] = derived[key]
            row["derived"].append(key)
    return row


@context.command("inspect")
@click.argument("session")
@click.option("--leaf", help="Turn id of the leaf (default: the session's active leaf).")
@click.option(
    "--prune", is_flag=True, help="Apply the prune view: old tool outputs as placeholders."
)
@json_option
@click.pass_context
def inspect(ctx: click.Context, session: str, leaf: str | None, prune: bool, as_json: bool) -> None:
    """List each message of SESSION's context: role, tool, tokens, pruned or not.

    \b
    Example:
        nexus-store context inspect latest --prune
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    pruned: set[int] = set()
    if prune:
        result, outcome = store.pruned_context(info.id, leaf)
        pruned = set(outcome.pruned)
    else:
        result = store.context(info.id, leaf)
    rows = [
        {
            "turn": turn_id,
            "role": m.get("role") if isinstance(m, dict) else None,
            "tool": m.get("toolName") if isinstance(m, dict) else None,
            "tokens": n,
            "pruned": i in pruned,
        }
        for i, (turn_id, m, n) in enumerate(
            zip(result.turn_ids, result.messages, result.message_tokens, strict=True)
        )
    ]
    if as_json:
        echo_json({"messages": rows, "tokens": result.tokens, "pruned": len(pruned)})
        return
    for r in rows:
        mark = "  (pruned)" if r["pruned"] else ""
        echo(f"{r['turn']}  {r['role'] or '?':<18} {r['tool'] or '':<16} {r['tokens']:>8,}{mark}")
    echo(
        f"total {result.tokens:,} tokens in {len(rows)} messages"
        + (f", {len(pruned)} pruned" if prune else "")
    )


@context.command("export")
@click.argument("session")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def export_backup(ctx: click.Context, session: str, file: Path) -> None:
    """Write a JSON backup of SESSION to FILE (context import restores it identically).

    \b
    Example:
        nexus-store context export latest backup.json
    """
    from nexus_store.safe_write import private_text_file  # not at import (issue 17)

    store = open_store(ctx)
    info = store.resolve_session(session)
    data = store.backup_session(info.id)
    with private_text_file(file) as handle:  # 0600, no planted link followed (issue 18)
        handle.write(json.dumps(data, ensure_ascii=False))
    echo(f"wrote {len(data['entries'])} turns of {info.id} to {file}", err=True)


@context.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def import_backup(ctx: click.Context, file: Path) -> None:
    """Restore a session from a JSON backup written by context export.

    \b
    Example:
        nexus-store context import backup.json
    """
    store = open_store(ctx, create=True)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise click.ClickException(f"{file} is not a JSON backup: {err}") from None
    session_id = store.restore_session(data)
    echo(f"restored session {session_id}")
