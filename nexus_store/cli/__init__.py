"""The ``nexus-store`` command line: a thin shell over `nexus_store.Store`.

Each command opens the store, calls one library method and renders the result.
Library errors become one line on stderr and exit code 1 (usage errors: 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from nexus_store import __version__
from nexus_store.cli._common import CONTEXT_SETTINGS, NexusGroup, database_target
from nexus_store.cli.compacting import compact, navigate
from nexus_store.cli.context import context
from nexus_store.cli.copying import copy
from nexus_store.cli.maintenance import backup, doctor, gc
from nexus_store.cli.openclaw import openclaw
from nexus_store.cli.read import schema, sessions, sql, tree
from nexus_store.cli.search import search
from nexus_store.cli.service import serve
from nexus_store.cli.sync import sync
from nexus_store.cli.transfer import export, import_

__all__ = ["cli"]


@click.group(cls=NexusGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="nexus-store")
@click.option(
    "--db",
    callback=database_target,
    metavar="PATH|URL",
    envvar="NEXUS_STORE_DB",
    help="Database file or postgresql:// URL. Default: $NEXUS_STORE_DB, else "
    "$XDG_DATA_HOME/nexus_store/sessions.db (~/.local/share/nexus_store/sessions.db).",
)
@click.option(
    "--counter",
    type=click.Choice(["cl100k_base", "chars4"]),
    help="Token counter for a new database: cl100k_base (tiktoken, offline; the default) or "
    "chars4 (pi's chars/4 estimate, faster). An existing database keeps the one it was created "
    "with.",
)
def cli(db: Path | str | None, counter: str | None) -> None:
    """Store LLM agent sessions as a tree of turns in SQLite.

    Sessions branch, compaction turns summarize old history without deleting
    it, and the context of any leaf is assembled by one SQL query.

    \b
    Example:
        nexus-store import ~/.pi/agent/sessions
        nexus-store sessions
        nexus-store tree latest
        nexus-store context show latest --json
    """


for command in (
    import_,
    export,
    sync,
    sessions,
    tree,
    context,
    compact,
    navigate,
    sql,
    schema,
    search,
    doctor,
    gc,
    backup,
    copy,
    serve,
    openclaw,
):
    cli.add_command(command)
