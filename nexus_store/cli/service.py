"""``nexus-store serve``: the local context-engine service of one database."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from nexus_store.cli._common import default_db_path, echo_json, json_option
from nexus_store.errors import NexusError

__all__ = ["serve"]


def database_file(ctx: click.Context) -> Path | str:
    """The --db target: a resolved file path, or a ``postgresql://`` URL as given."""
    target = ctx.find_root().params["db"] or default_db_path()
    return target if isinstance(target, str) else Path(target).resolve()


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="TCP port; 0 picks a free one (written to DB.service.json).",
)
@click.option(
    "--summarizer",
    type=click.Choice(["extractive", "openai"]),
    default="extractive",
    show_default=True,
    help="Compaction summarizer: extractive (offline) or openai (NEXUS_SUMMARIZER_* settings).",
)
@click.option(
    "--status", is_flag=True, help="Only say whether a service runs on the database, and where."
)
@click.option(
    "--stop", is_flag=True, help="Stop the service running on the database (SIGTERM) and wait."
)
@json_option
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    summarizer: str,
    status: bool,
    stop: bool,
    as_json: bool,
) -> None:
    """Serve the context-engine lifecycle of a database over HTTP/JSON (for OpenClaw).

    Listens on 127.0.0.1 and on the Unix socket DB.sock, one service per
    database (DB.service.lock), until SIGTERM or Ctrl-C. Every request needs
    the bearer token in DB.token (created 0600). For a postgresql:// URL these
    files are in ~/.local/state/nexus_store/services/KEY/ ($XDG_STATE_HOME; KEY
    hashes the URL without its password). The OpenAPI description is at
    /openapi.json. If a service already runs on the database, this says where
    and exits 0. The OpenClaw plugin starts it by itself when none answers.

    \b
    Example:
        nexus-store serve
        nexus-store --db ~/agents.db serve --port 8765
        nexus-store serve --status --json
        nexus-store serve --stop
        nexus-store --db postgresql://me@localhost/agents serve
    """
    from nexus_store.service.runner import ServiceFiles, running

    database = database_file(ctx)
    files = ServiceFiles.of(database)
    if stop:
        from nexus_store.service.runner import stop_service

        stopped = stop_service(files)
        if as_json:
            echo_json(None if stopped is None else stopped.__dict__)
        elif stopped is None:
            click.echo(f"no service runs on {files.label}")
        else:
            click.echo(f"stopped the service of {stopped.database} (pid {stopped.pid})")
        return
    if status:
        info = running(files)
        if as_json:
            echo_json(None if info is None else info.__dict__)
        elif info is None:
            click.echo(f"no service runs on {files.label}")
        else:
            click.echo(
                f"serving {info.database} at {info.url} (socket {info.socket}, pid {info.pid})"
            )
        return
    try:
        from nexus_store.service.runner import serve as run_service
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise NexusError(
            "the service needs the serve extra: pip install 'nexus_store[serve]'"
        ) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s nexus-store serve: %(message)s")

    def ready(info: object) -> None:
        if as_json:
            echo_json(info.__dict__)
        else:
            click.echo(f"serving {files.label} at {info.url} (pid {info.pid}); Ctrl-C stops")  # type: ignore[attr-defined]

    try:
        other = run_service(database, host=host, port=port, summarizer=summarizer, ready=ready)
    except ImportError:
        raise NexusError(
            "the service needs the serve extra: pip install 'nexus_store[serve]'"
        ) from None
    if other is not None:
        if as_json:
            echo_json(other.__dict__)
        else:
            click.echo(f"already serving {other.database} at {other.url} (pid {other.pid})")
