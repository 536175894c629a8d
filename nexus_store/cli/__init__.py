"""The ``nexus-store`` command line: a thin shell over `nexus_store.Store`.

Each command opens the store, calls one library method and renders the result.
Library errors become one line on stderr and exit code 1 (usage errors: 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from nexus_store import __version__
from nexus_store.cli._common import CONTEXT_SETTINGS, NexusGroup, database_target

__all__ = ["cli"]

# Each command's module is imported when that command runs (or shows its help), so a
# command pays only for its own imports (issue 17: `context status` in well under the
# time of importing every command).
COMMANDS = {
    "import": "nexus_store.cli.transfer:import_",
    "export": "nexus_store.cli.transfer:export",
    "sync": "nexus_store.cli.sync:sync",
    "sessions": "nexus_store.cli.read:sessions",
    "tree": "nexus_store.cli.read:tree",
    "context": "nexus_store.cli.context:context",
    "compact": "nexus_store.cli.compacting:compact",
    "navigate": "nexus_store.cli.compacting:navigate",
    "sql": "nexus_store.cli.read:sql",
    "schema": "nexus_store.cli.read:schema",
    "search": "nexus_store.cli.search:search",
    "doctor": "nexus_store.cli.maintenance:doctor",
    "gc": "nexus_store.cli.maintenance:gc",
    "backup": "nexus_store.cli.maintenance:backup",
    "copy": "nexus_store.cli.copying:copy",
    "serve": "nexus_store.cli.service:serve",
    "openclaw": "nexus_store.cli.openclaw:openclaw",
}


@click.group(cls=NexusGroup, context_settings=CONTEXT_SETTINGS, lazy_commands=COMMANDS)
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
