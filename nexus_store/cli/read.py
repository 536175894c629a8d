"""Commands that read: sessions, tree, sql."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import click

from nexus_store.cli._common import (
    default_db_path,
    echo,
    echo_json,
    echo_json_text,
    json_option,
    open_store,
    print_table,
)
from nexus_store.cli.views import FOLD_RUNS_OVER, draw_tree, turn_preview
from nexus_store.store.readonly import DEFAULT_TIMEOUT, run_readonly
from nexus_store.store.schema_info import describe_schema

__all__ = ["schema", "sessions", "sql", "tree"]


@click.command()
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many sessions.")
@json_option
@click.pass_context
def sessions(ctx: click.Context, limit: int | None, as_json: bool) -> None:
    """List sessions, the newest conversation first.

    Sessions are ordered by their newest turn's time (an imported session by its
    entries' timestamps, not by when it was imported); "latest" in other
    commands is the first of this list.

    \b
    Example:
        nexus-store sessions --limit 10
        nexus-store sessions --json | jq '.[].id'
    """
    store = open_store(ctx)
    found = store.list_sessions(limit=limit)
    if as_json:
        echo_json([s.model_dump() for s in found])
        return
    if not found:
        echo("no sessions yet; import some with: nexus-store import PATH")
        return
    print_table(
        ["id", "turns", "updated", "title / cwd", "source"],
        (
            [
                s.id,
                s.turn_count,
                s.updated_utc[:19],
                s.title or s.cwd or "",
                s.source_format or "native",
            ]
            for s in found
        ),
    )


@click.command()
@click.argument("session")
@click.option(
    "--width",
    type=click.IntRange(min=10),
    default=60,
    show_default=True,
    help="Characters of preview per turn.",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help=f"Show every turn (by default a linear run of more than {FOLD_RUNS_OVER} turns "
    "shows its first and last three).",
)
@json_option
@click.pass_context
def tree(ctx: click.Context, session: str, width: int, show_all: bool, as_json: bool) -> None:
    """Draw the turn tree of SESSION with ids, kinds and previews.

    SESSION is a session id, a unique prefix of one, or "latest". A chain of
    turns reads downwards at one indentation; branches indent. The active leaf
    is marked. Long linear runs are folded to their ends; branch points,
    compactions, branch summaries, labels and the active leaf always show.
    --json lists every turn.

    \b
    Example:
        nexus-store tree latest
        nexus-store tree latest --all
        nexus-store tree 0193a1c2 --json
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    turns = list(store.iter_turns(info.id))
    labels = store.labels(info.id)
    if as_json:
        echo_json(
            {
                "session": info.id,
                "active_leaf": info.active_leaf,
                "turns": [
                    {
                        "id": t.id,
                        "parent_id": t.parent_id,
                        "kind": t.kind,
                        "depth": t.depth,
                        "preview": turn_preview(t, width),
                        "label": labels.get(t.id),
                    }
                    for t in turns
                ],
            }
        )
        return
    title = info.title or info.cwd or ""
    echo(f"session {info.id}  {title}  ({len(turns)} turns)".rstrip())
    for line in draw_tree(
        turns, info.active_leaf, labels, width, None if show_all else FOLD_RUNS_OVER
    ):
        echo(line)


@click.command()
@click.argument("query")
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="VALUE",
    help="A value bound to the next ? placeholder (repeatable).",
)
@click.option("--json", "fmt", flag_value="json", help="Print a JSON array of objects.")
@click.option("--nl", "fmt", flag_value="nl", help="Print one JSON object per line.")
@click.option("--csv", "fmt", flag_value="csv", help="Print CSV.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="Stop the query after this many seconds (a runaway recursive CTE).",
)
@click.pass_context
def sql(
    ctx: click.Context, query: str, params: tuple[str, ...], fmt: str | None, timeout: float
) -> None:
    """Run a read-only SQL QUERY against the database.

    The database is opened read-only: INSERT, UPDATE, DELETE, ATTACH,
    CREATE, PRAGMAs that set a value, load_extension, fts3_tokenizer and
    VACUUM are refused with a message, and the file is not changed. PRAGMAs
    that read work, also as table-valued functions (pragma_table_info('turns')).
    An error in the query is reported as SQLite words it. On PostgreSQL the
    query runs in a read-only transaction and functions that reach the
    server's files or settings (pg_read_file, ...) are refused. A query stops
    after --timeout seconds. Tables: sessions, turns, messages (nexus-store
    schema lists them; docs/schema.md explains them).

    \b
    Example:
        nexus-store sql "select kind, count(*) from turns group by kind"
        nexus-store sql "select uid from sessions where cwd = ?" -p /repo --json
        nexus-store sql "pragma table_info('turns')"
        nexus-store sql "select name from pragma_table_info('messages')" --csv
    """
    path: Path | str = ctx.find_root().params["db"] or default_db_path()
    columns, rows = run_readonly(path, query, list(params), timeout=timeout)
    if fmt == "json":
        echo_json([dict(zip(columns, row, strict=True)) for row in rows])
    elif fmt == "nl":
        for row in rows:
            echo_json_text(json.dumps(dict(zip(columns, row, strict=True)), ensure_ascii=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        print_table(columns, rows)


@click.command()
@click.argument("tables", nargs=-1)
@json_option
@click.pass_context
def schema(ctx: click.Context, tables: tuple[str, ...], as_json: bool) -> None:
    """List the tables and views of the database with their columns (read-only).

    TABLES limits the listing to those names. Each column shows its type and
    NOT NULL / primary key; the FTS5 search indexes are listed as virtual
    tables (their storage tables are left out). docs/schema.md explains every
    column; query them with nexus-store sql.

    \b
    Example:
        nexus-store schema
        nexus-store schema turns messages
        nexus-store schema --json | jq '.[].name'
    """
    path: Path | str = ctx.find_root().params["db"] or default_db_path()
    relations = describe_schema(path)
    if tables:
        unknown = sorted(set(tables) - {r.name for r in relations})
        if unknown:
            raise click.ClickException(
                f"no table or view named {', '.join(unknown)}; nexus-store schema lists them"
            )
        relations = [r for r in relations if r.name in tables]
    if as_json:
        echo_json([r.model_dump() for r in relations])
        return
    for n, relation in enumerate(relations):
        if n:
            echo()
        echo(f"{relation.type} {relation.name}")
        width = max(len(c.name) for c in relation.columns)
        type_width = max(len(c.type or "-") for c in relation.columns)
        for column in relation.columns:
            notes = [(column.type or "-").ljust(type_width)]
            if column.primary_key:
                notes.append("primary key")
            if column.not_null:
                notes.append("not null")
            if column.default is not None:
                notes.append(f"default {column.default}")
            echo(f"  {column.name.ljust(width)}  {'  '.join(notes)}".rstrip())
