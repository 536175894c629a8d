"""``python -m nexus_store``: the same as the ``nexus-store`` command."""

from nexus_store.cli import cli

cli(prog_name="nexus-store")
