"""``nexus-store copy``: move every session between SQLite and PostgreSQL (issue 8)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nexus_store.cli._common import database_target, echo, echo_json
from nexus_store.errors import NexusError
from nexus_store.store import Store

__all__ = ["copy"]


@click.command()
@click.option(
    "--from",
    "source",
    callback=database_target,
    metavar="PATH|URL",
    required=True,
    help="The database to read: a file or a postgresql:// URL.",
)
@click.option(
    "--to",
    "target",
    callback=database_target,
    metavar="PATH|URL",
    required=True,
    help="The database to write (created and migrated if new): a file or a postgresql:// URL.",
)
@click.option(
    "--session",
    "session_ids",
    multiple=True,
    metavar="ID",
    help="Copy only this session (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def copy(
    source: Path | str,
    target: Path | str,
    session_ids: tuple[str, ...],
    as_json: bool,
    quiet: bool,
) -> None:
    """Copy every session with its whole tree from one database to another.

    Moves a SQLite file to a PostgreSQL server and back: same ids, trees,
    active leaves and titles. Each session is copied in one transaction, so the
    copy can be interrupted and run again: it completes what is missing and
    copies nothing twice. Both databases must use the same token counter (a
    new destination takes the source's).

    \b
    Example:
        nexus-store copy --from sessions.db --to postgresql://app@db.internal/agents
        nexus-store copy --from postgresql:///agents?host=/run/postgresql --to back.db
    """
    if isinstance(source, Path) and not source.exists():
        raise NexusError(f"no database at {source}; give --from an existing file or a URL")
    if isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Store(source) as src, _open_target(target, src.counter.name) as dst:
        ids = list(session_ids) or None
        if as_json or quiet or not sys.stderr.isatty():
            report = src.copy_to(dst, session_ids=ids)
        else:
            with click.progressbar(length=1, label="copying", file=sys.stderr) as bar:
                seen = [0]

                def progress(done: int, total: int, turns: int) -> None:
                    bar.length = total
                    bar.label = f"copying ({turns:,} turns)"
                    bar.update(done - seen[0])
                    seen[0] = done

                report = src.copy_to(dst, session_ids=ids, progress=progress)
    if as_json:
        echo_json(report.model_dump())
    else:
        echo(
            f"{report.sessions} sessions: {report.copied} copied, {report.skipped} already "
            f"complete; {report.turns:,} turns written in {report.seconds:.2f}s"
        )


def _open_target(target: Path | str, counter: str) -> Store:
    """Open the destination: a new file with the source's counter, else as it is.

    (copy_to gives an existing one the source's counter if it holds no session yet.)
    """
    if isinstance(target, Path) and not target.exists():
        return Store(target, counter=counter)
    return Store(target)
