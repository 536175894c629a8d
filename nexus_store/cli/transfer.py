"""``nexus-store import`` and ``export``: transcripts in and out."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nexus_store.cli._common import echo, echo_json, open_store
from nexus_store.examples import EXAMPLE_TRANSCRIPT
from nexus_store.store.importing import find_transcripts

__all__ = ["export", "import_"]


@click.command("import")
@click.argument("paths", nargs=-1)
@click.option(
    "--example", is_flag=True, help="Import the small example session bundled with nexus_store."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["pi", "openclaw", "ndjson", "claude_code", "codex"]),
    help="Force a format (default: detected from each file's content).",
)
@click.option("--strict", is_flag=True, help="All or nothing per file: stop at its first problem.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no problem list.")
@click.pass_context
def import_(
    ctx: click.Context,
    paths: tuple[str, ...],
    example: bool,
    fmt: str | None,
    strict: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Import transcripts: files, directories (searched recursively) or - for stdin.

    Formats are detected from the content: pi / OpenClaw session JSONL (v1-v3),
    the compaction-event NDJSON, Claude Code and Codex CLI transcripts, and
    OpenClaw's own database (openclaw-agent.sqlite, read-only). A path that is
    not a transcript (binary, archive, README, empty folder) is reported and
    makes no session; nothing importable at all exits 1. Import
    is idempotent: a file imported twice changes nothing, a longer version of a
    file adds only its new entries. Odd lines are repaired or skipped and
    reported with file:line; each file is stored in one transaction.

    \b
    Example:
        nexus-store import ~/.pi/agent/sessions
        nexus-store import ~/.claude/projects --json
        nexus-store import ~/.openclaw/agents
        cat session.jsonl | nexus-store import -
        nexus-store import --example
    """
    if example:
        paths = (*paths, str(EXAMPLE_TRANSCRIPT))
    if not paths:
        raise click.UsageError("give PATHS to import (files, directories or -), or --example")
    store = open_store(ctx, create=True)
    files = [Path(p) for p in paths if p != "-"]
    total = sum(x.stat().st_size for f in files if f.exists() for x in find_transcripts(f))
    show_bar = not (as_json or quiet) and sys.stderr.isatty() and total > 0
    if show_bar:
        with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, entries: int) -> None:
                bar.label = f"importing ({entries:,} entries)"
                bar.update(done - seen[0])
                seen[0] = done

            report = store.import_paths(list(paths), format=fmt, strict=strict, progress=progress)
    else:
        report = store.import_paths(list(paths), format=fmt, strict=strict)
    if as_json:
        echo_json(report.model_dump())
    else:
        if not quiet:
            for p in report.problems[:50]:
                action = "repaired" if p["repaired"] else "skipped"
                echo(f"{p['path']}:{p['line']}: {p['kind']} ({action}): {p['message']}", err=True)
            if len(report.problems) > 50:
                echo(f"... and {len(report.problems) - 50} more problems (see --json)", err=True)
        mb = report.bytes / 1e6
        rate = mb / report.seconds if report.seconds else 0.0
        echo(
            f"{report.files} files, {len(set(report.sessions))} sessions, {report.turns:,} turns, "
            f"{report.messages:,} messages added; {report.repaired} repaired, {report.skipped} "
            f"skipped, {report.conflicts} conflicts, {len(report.errors)} errors "
            f"({mb:.1f} MB in {report.seconds:.2f}s, {rate:.1f} MB/s)"
        )
        for error in report.errors:
            echo(f"error: {error}", err=True)
        for skipped in report.not_transcripts:
            echo(skipped, err=True)
    if report.errors or (report.not_transcripts and not report.sessions):
        ctx.exit(1)  # an error, or nothing importable at all


@click.command()
@click.argument("session")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (default: standard output).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["pi", "ndjson"]),
    default="pi",
    show_default=True,
    help="pi: pi / OpenClaw session JSONL v3; ndjson: the compaction-event NDJSON.",
)
@click.option("--leaf", help="Export only the path from the root to this turn.")
@click.pass_context
def export(
    ctx: click.Context, session: str, output: Path | None, fmt: str, leaf: str | None
) -> None:
    """Export SESSION as JSONL that pi / OpenClaw loads (the whole tree, or one path).

    For pi v3 input, import then export gives back the same JSON values line
    for line; v1 and v2 input exports as v3. The file is written whole or not
    at all. An active leaf that is not the last entry (pi's leaf) is named in
    the header ("nexusStore": {"activeLeafId": ...}) and restored by import.

    \b
    Example:
        nexus-store export latest -o session.jsonl
        nexus-store export 0193a1c2 --leaf a100000c --format ndjson
    """
    store = open_store(ctx)
    info = store.resolve_session(session)
    if output is None:
        store.export_jsonl(info.id, sys.stdout, leaf_id=leaf, format=fmt)
    else:
        count = store.export_jsonl(info.id, output, leaf_id=leaf, format=fmt)
        echo(f"wrote {count} lines to {output}", err=True)
