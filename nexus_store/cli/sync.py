"""``nexus-store sync``: keep the store current with the transcripts agents write."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from nexus_store.cli._common import echo_json, open_store
from nexus_store.errors import NexusError
from nexus_store.sync import SyncReport, default_sources, sync_paths, watch

__all__ = ["sync"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--watch", "follow", is_flag=True, help="Keep syncing as files change, until Ctrl-C.")
@click.option(
    "--debounce",
    type=click.IntRange(min=0),
    default=500,
    show_default=True,
    help="With --watch: changes closer together than this many milliseconds are one sync.",
)
@click.option("--strict", is_flag=True, help="All or nothing per source: stop at its 1st problem.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the summary as JSON (--watch: one line per sync).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no problem list.")
@click.pass_context
def sync(
    ctx: click.Context,
    paths: tuple[Path, ...],
    follow: bool,
    debounce: int,
    strict: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Import what is new in the transcripts on this machine (or in PATHS).

    With no PATHS, syncs the folders of the agent tools that exist here:
    ~/.claude/projects, ~/.codex/sessions, ~/.pi/agent/sessions, and OpenClaw's
    ~/.openclaw/agents/*/sessions and agents/*/agent/openclaw-agent.sqlite (each
    tool's own variable moves it: CLAUDE_CONFIG_DIR, CODEX_HOME,
    PI_CODING_AGENT_DIR, OPENCLAW_STATE_DIR; NEXUS_STORE_SYNC_PATHS replaces the
    list). A checkpoint per source, kept in the database, makes a sync cost what
    changed: one stat for an unchanged file, the new bytes of a grown one, the new
    rows of an OpenClaw session. A rewritten or truncated file is re-read and
    reported, never mixed; a deleted one keeps its sessions. OpenClaw's database is
    read-only, without ever blocking OpenClaw.

    \b
    Example:
        nexus-store sync
        nexus-store sync ~/.claude/projects --json
        nexus-store sync --watch
        nexus-store sync -q  # from cron: */10 * * * * (every 10 minutes)
    """
    store = open_store(ctx, create=True)
    roots = list(paths) if paths else default_sources()
    if not roots:
        raise NexusError(
            "no agent transcripts found in the default locations (~/.claude/projects, "
            "~/.codex/sessions, ~/.pi/agent/sessions, ~/.openclaw/agents); give PATHS"
        )
    if follow:
        if not (as_json or quiet):
            click.echo(f"watching {len(roots)} location(s); Ctrl-C to stop", err=True)
        try:
            watch(
                store,
                roots,
                lambda report: _render(report, as_json=as_json, quiet=quiet, lines=True),
                debounce_ms=debounce,
            )
        except KeyboardInterrupt:
            if not (as_json or quiet):
                click.echo("stopped", err=True)
        return
    show_bar = not (as_json or quiet) and sys.stderr.isatty()
    if show_bar:
        with click.progressbar(length=1, label="syncing", file=sys.stderr) as bar:

            def progress(done: int, total: int, entries: int) -> None:
                bar.length = total
                bar.label = f"syncing ({entries:,} entries)"
                bar.update(done - bar.pos)

            report = sync_paths(store, roots, strict=strict, progress=progress)
    else:
        report = sync_paths(store, roots, strict=strict)
    _render(report, as_json=as_json, quiet=quiet)
    if report.errors:
        ctx.exit(1)


def _render(report: SyncReport, *, as_json: bool, quiet: bool, lines: bool = False) -> None:
    if as_json and lines:  # --watch --json: one JSON object per line, per sync
        click.echo(json.dumps(report.model_dump(), ensure_ascii=False))
        return
    if as_json:
        echo_json(report.model_dump())
        return
    if not quiet:
        for p in report.problems[:50]:
            action = "repaired" if p["repaired"] else "skipped"
            click.echo(f"{p['path']}:{p['line']}: {p['kind']} ({action}): {p['message']}", err=True)
        if len(report.problems) > 50:
            click.echo(f"... and {len(report.problems) - 50} more problems (see --json)", err=True)
        for line in [*report.reread, *report.missing, *report.not_transcripts]:
            click.echo(line, err=True)
    mb = report.bytes / 1e6
    click.echo(
        f"{report.sources} sources: {report.unchanged} unchanged, {report.new} new, "
        f"{report.grown} grown, {len(report.reread)} re-read, {len(report.missing)} gone, "
        f"{len(report.not_transcripts)} not transcripts; {len(set(report.sessions))} sessions, "
        f"{report.turns:,} turns, {report.messages:,} messages added; {report.conflicts} "
        f"conflicts, {len(report.errors)} errors ({mb:.1f} MB read in {report.seconds:.2f}s)"
    )
    for error in report.errors:
        click.echo(f"error: {error}", err=True)
