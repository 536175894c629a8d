"""``nexus-store doctor``, ``gc`` and ``backup``: check, repair, remove old data, copy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from nexus_store.cli._common import echo, echo_json, json_option, open_store
from nexus_store.store.gc import GcReport

__all__ = ["backup", "doctor", "gc"]


@click.command()
@click.option("--fix", is_flag=True, help="Repair what is safe to repair, saying what was done.")
@click.option(
    "--wal-limit",
    type=click.IntRange(min=0),
    default=64 * 1024 * 1024,
    show_default=True,
    help="Report (and with --fix checkpoint) a WAL larger than this many bytes.",
)
@json_option
@click.pass_context
def doctor(ctx: click.Context, fix: bool, wal_limit: int, as_json: bool) -> None:
    """Check the database: integrity, links, stored path values, active leaves, WAL, modes.

    Reports every problem. With --fix it repairs only what is derived or
    reversible: path values recomputed from the parents, a bad active leaf
    moved to the session's latest turn, the WAL checkpointed, file modes set
    to 600. Entries are never changed. Exits 1 while a problem is left.
    On PostgreSQL it checks path values and active leaves; the server
    enforces links and checks its own files.

    \b
    Example:
        nexus-store doctor
        nexus-store doctor --fix --json
    """
    store = open_store(ctx)
    report = store.doctor(fix=fix, wal_limit=wal_limit)
    if as_json:
        echo_json(report.model_dump())
    else:
        for finding in report.findings:
            mark = "fixed" if finding.fixed else finding.severity
            echo(f"[{mark}] {finding.check}: {finding.message}")
        for action in report.actions:
            echo(f"did: {action}")
        wal = "-" if report.wal_bytes is None else f"{report.wal_bytes:,} bytes"
        state = "ok" if report.ok else "problems left"
        echo(f"{state}: {report.turns_checked} turns checked, WAL {wal}")
    if not report.ok:
        ctx.exit(1)


@click.command()
@click.argument("session", required=False)
@click.option("--all", "all_sessions", is_flag=True, help="Clean every session.")
@click.option(
    "--dry-run", is_flag=True, help="Say what would go and how many bytes; change nothing."
)
@click.option(
    "--dead-branches-older-than",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Remove branches off the kept paths whose turns are all older than DAYS.",
)
@click.option(
    "--compacted-older-than",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Remove turns older than DAYS behind a compaction that no leaf's context uses.",
)
@click.option(
    "--sessions-older-than",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Remove whole sessions last updated more than DAYS ago.",
)
@click.option(
    "--keep",
    multiple=True,
    metavar="TURN",
    help="A turn whose path and context must stay, besides the active leaf (repeatable).",
)
@click.option("--no-vacuum", is_flag=True, help="Do not checkpoint and VACUUM afterwards.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation before removing.")
@json_option
@click.pass_context
def gc(
    ctx: click.Context,
    session: str | None,
    all_sessions: bool,
    dry_run: bool,
    dead_branches_older_than: float | None,
    compacted_older_than: float | None,
    sessions_older_than: float | None,
    keep: tuple[str, ...],
    no_vacuum: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Remove old data from SESSION (or --all) without breaking any tree.

    Only what the options ask for goes: dead branches, raw turns behind a
    compaction, whole sessions. The context of every remaining leaf stays the
    same. Then the WAL is checkpointed and the file vacuumed. This is the only
    command that deletes rows, so it shows what would go and asks first
    (--yes to skip the question; --dry-run to only show).

    \b
    Example:
        nexus-store gc latest --dead-branches-older-than 30 --dry-run
        nexus-store gc --all --compacted-older-than 90 --sessions-older-than 365
        nexus-store gc --all --sessions-older-than 365 --yes
    """
    if (session is None) == (not all_sessions):
        raise click.UsageError("give a SESSION or --all (not both)")
    store = open_store(ctx)
    session_id = store.resolve_session(session).id if session is not None else None

    def run(dry: bool) -> GcReport:
        options: dict[str, Any] = {
            "all_sessions": all_sessions,
            "dead_branches_older_than": dead_branches_older_than,
            "compacted_older_than": compacted_older_than,
            "sessions_older_than": sessions_older_than,
            "keep": keep,
            "dry_run": dry,
            "vacuum": not no_vacuum,
        }
        if as_json or dry or not sys.stderr.isatty():
            return store.gc(session_id, **options)
        # the removal goes in batches, each its own transaction: show them (issue 18)
        with click.progressbar(length=1, label="removing", file=sys.stderr) as bar:
            seen = [0]

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - seen[0])
                seen[0] = done

            return store.gc(session_id, progress=progress, **options)

    if not (dry_run or yes):
        plan = run(True)
        if plan.dead_branch_turns + plan.compacted_turns + len(plan.sessions_removed) == 0:
            if as_json:
                echo_json(plan.model_dump())
            else:
                _print_gc(plan)
                echo("nothing to remove")
            return
        _print_gc(plan, err=True)
        try:
            confirmed = click.confirm("Remove these rows for good?", default=False, err=True)
        except click.Abort:
            confirmed = False
        if not confirmed:
            echo("gc cancelled; nothing was removed (--yes skips this question)", err=True)
            ctx.exit(1)
    report = run(dry_run)
    if as_json:
        echo_json(report.model_dump())
        return
    _print_gc(report)


def _print_gc(report: GcReport, *, err: bool = False) -> None:
    """What gc removed, or (dry run) would remove, in the matching mood."""
    dry = report.dry_run
    echo(
        f"{'would remove' if dry else 'removed'}: {report.dead_branch_turns} dead-branch turns, "
        f"{report.compacted_turns} turns behind compactions, {len(report.sessions_removed)} "
        f"sessions, {report.messages} messages (~{report.estimated_bytes:,} bytes of rows)",
        err=err,
    )
    for item in report.reparented:
        if dry:
            line = f"would re-root {item['turn']} (its parent {item['old_parent']} would go)"
        else:
            line = f"re-rooted {item['turn']} (its parent {item['old_parent']} is gone)"
        echo(line, err=err)
    for kept in report.sessions_kept:
        verb = "would keep" if dry else "kept"
        echo(f"{verb} session {kept['session']}: {kept['reason']}", err=err)
    for action in report.actions:
        echo(f"did: {action}", err=err)


@click.command()
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@click.pass_context
def backup(ctx: click.Context, dest: Path, force: bool) -> None:
    """Write a whole, consistent copy of the database to the file DEST.

    Copying the .db file alone can miss what is still in its -wal file; this
    copies one consistent snapshot (WAL included) while other processes keep
    writing, into a new file readable by its owner only (0600), checks it and
    renames it into place. DEST must not exist unless --force is given. The
    copy is an ordinary nexus_store database: open it with --db DEST.
    PostgreSQL stores: use pg_dump.

    \b
    Example:
        nexus-store backup ~/sessions-backup.db
        nexus-store backup ~/sessions-backup.db --force
    """
    store = open_store(ctx)
    size = store.backup(dest, force=force)
    echo(f"wrote a backup of {size:,} bytes to {dest}", err=True)
