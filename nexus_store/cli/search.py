"""``nexus-store search``: full-text search over messages and summaries."""

from __future__ import annotations

import click

from nexus_store.cli._common import echo, echo_json, json_option, open_store, print_table

__all__ = ["search"]


@click.command()
@click.argument("query")
@click.option("--session", help="Only this session (id, unique id prefix, or latest).")
@click.option(
    "--role",
    help="Only messages with this role (user, assistant, toolResult, ...; "
    "compactionSummary or branchSummary for summaries).",
)
@click.option("--tool", help="Only results of this tool (e.g. bash, read).")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most N hits."
)
@click.option(
    "--literal", is_flag=True, help="Match the words as typed instead of FTS5 query syntax."
)
@json_option
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    session: str | None,
    role: str | None,
    tool: str | None,
    limit: int,
    literal: bool,
    as_json: bool,
) -> None:
    """Search message text and compaction/branch summaries for QUERY.

    QUERY is FTS5 syntax: words (all must match), "a phrase", OR, NOT,
    prefix*, NEAR(a b). Hits are BM25-ranked, best first; rank is lower for
    a better match. Matches in the snippet are wrapped in [brackets].
    On a PostgreSQL database QUERY is web-search syntax instead: words,
    "a phrase", or, -word (no prefixes), ranked by ts_rank_cd.

    \b
    Example:
        nexus-store search "permission denied" --tool bash
        nexus-store search 'migrat* NOT sqlite' --session latest --json
        nexus-store search "foo-bar.baz" --literal --limit 5
    """
    store = open_store(ctx)
    session_id = None if session is None else store.resolve_session(session).id
    hits = store.search(
        query, session=session_id, role=role, tool=tool, limit=limit, literal=literal
    )
    if as_json:
        echo_json([hit.model_dump() for hit in hits])
        return
    if not hits:
        echo("no matches")
        return
    print_table(
        ["session", "turn", "role", "tool", "snippet"],
        (
            [
                hit.session_id[:8],
                hit.turn_id,
                hit.role or hit.kind,
                hit.tool_name or "",
                hit.snippet,
            ]
            for hit in hits
        ),
        max_width=80,
    )
