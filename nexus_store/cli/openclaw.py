"""``nexus-store openclaw install|uninstall``: select nexus_store as OpenClaw's context engine.

Both run OpenClaw's own commands (``plugins install -l``, ``config set``, ``plugins
uninstall``), so OpenClaw validates and writes its configuration itself. The engine that
was selected before is remembered in the plugin's own config (``previousEngine``) and
put back by ``uninstall``; the database and its sessions stay where they are.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from nexus_store.cli._common import echo_json, json_option
from nexus_store.cli.service import database_file
from nexus_store.errors import NexusError
from nexus_store.store.pg import redact

__all__ = ["openclaw"]

PLUGIN_ID = "nexus-store"


def _openclaw_command(given: str | None) -> list[str] | None:
    if given:
        return shlex.split(given)
    found = shutil.which("openclaw")
    return [found] if found else None


def _run(command: list[str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [*command, *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except FileNotFoundError:
        raise NexusError(f"cannot run {command[0]!r}: not found; pass --openclaw CMD") from None
    except subprocess.TimeoutExpired:
        raise NexusError(f"`{shlex.join(argv)}` did not finish in 10 minutes") from None
    if check and done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise NexusError(
            f"`{shlex.join(argv)}` failed (exit {done.returncode}): "
            f"{lines[-1] if lines else 'no output'}"
        )
    return done


def _config_get(command: list[str], path: str) -> Any:
    """A value of OpenClaw's config, or None when unset."""
    done = _run(command, "config", "get", path, "--json", check=False)
    try:
        value = json.loads(done.stdout)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("ok") is False:
        return None
    return value


def _plugin_config(
    database: Path | str,
    summarizer: str | None,
    previous: str,
    keep_recent: int | None = None,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "db": str(database),
        "command": [sys.executable, "-m", "nexus_store"],
        "previousEngine": previous,
    }
    if summarizer:
        config["summarizer"] = summarizer
    if keep_recent is not None:
        config["keepRecentTokens"] = keep_recent
    return config


def _steps(plugin_dir: Path, config: dict[str, Any]) -> list[str]:
    return [
        f"openclaw plugins install -l {shlex.quote(str(plugin_dir))} --force --accept-capabilities",
        f"openclaw config set plugins.entries.{PLUGIN_ID}.config "
        f"{shlex.quote(json.dumps(config))} --strict-json",
        f"openclaw config set plugins.slots.contextEngine {PLUGIN_ID}",
    ]


@click.group()
def openclaw() -> None:
    """Use nexus_store as OpenClaw's context engine (install, uninstall).

    \b
    Example:
        nexus-store openclaw install
        nexus-store openclaw uninstall
    """


@openclaw.command()
@click.option(
    "--openclaw",
    "openclaw_cmd",
    metavar="CMD",
    help="How to run OpenClaw (default: `openclaw` on PATH), e.g. 'node /path/openclaw.mjs'.",
)
@click.option(
    "--summarizer",
    type=click.Choice(["extractive", "openai"]),
    help="Compaction summarizer (default: extractive, offline).",
)
@click.option(
    "--keep-recent-tokens",
    type=click.IntRange(min=0),
    help="Tokens a compaction keeps verbatim (default: nexus_store's 20,000).",
)
@json_option
@click.pass_context
def install(
    ctx: click.Context,
    openclaw_cmd: str | None,
    summarizer: str | None,
    keep_recent_tokens: int | None,
    as_json: bool,
) -> None:
    """Install the nexus_store plugin into OpenClaw and select it as the context engine.

    Runs OpenClaw's `plugins install -l` on the plugin shipped inside this
    package, writes the plugin's config (the database, how to start `nexus-store
    serve`) and selects it in plugins.slots.contextEngine, remembering the engine
    selected before. Without OpenClaw on PATH (or --openclaw) it prints the
    exact commands to run instead, and exits 1. Restart the gateway afterwards.

    \b
    Example:
        nexus-store openclaw install
        nexus-store --db ~/agents.db openclaw install --openclaw 'npx openclaw'
    """
    from nexus_store.integrations import openclaw_plugin_dir

    database = database_file(ctx)
    plugin_dir = openclaw_plugin_dir()
    command = _openclaw_command(openclaw_cmd)
    if command is None:
        steps = _steps(
            plugin_dir, _plugin_config(database, summarizer, "legacy", keep_recent_tokens)
        )
        click.echo("OpenClaw is not on PATH (or pass --openclaw CMD). To install by hand, run:")
        for step in steps:
            click.echo(f"  {step}")
        ctx.exit(1)
    previous = _config_get(command, "plugins.slots.contextEngine") or "legacy"
    if previous == PLUGIN_ID:  # installed before: keep what it replaced then
        previous = (
            _config_get(command, f"plugins.entries.{PLUGIN_ID}.config.previousEngine") or "legacy"
        )
    config = _plugin_config(database, summarizer, str(previous), keep_recent_tokens)
    _run(command, "plugins", "install", "-l", str(plugin_dir), "--force", "--accept-capabilities")
    _run(
        command,
        "config",
        "set",
        f"plugins.entries.{PLUGIN_ID}.config",
        json.dumps(config),
        "--strict-json",
    )
    _run(command, "config", "set", "plugins.slots.contextEngine", PLUGIN_ID)
    shown = redact(database) if isinstance(database, str) else str(database)
    result = {"plugin": str(plugin_dir), "database": shown, "previousEngine": previous}
    if as_json:
        echo_json(result)
    else:
        click.echo(f"installed {PLUGIN_ID} from {plugin_dir}")
        click.echo(f"context engine: {PLUGIN_ID} (was {previous}); database {shown}")
        click.echo("restart the OpenClaw gateway for it to take effect")


@openclaw.command()
@click.option(
    "--openclaw",
    "openclaw_cmd",
    metavar="CMD",
    help="How to run OpenClaw (default: `openclaw` on PATH).",
)
@json_option
@click.pass_context
def uninstall(ctx: click.Context, openclaw_cmd: str | None, as_json: bool) -> None:
    """Remove the nexus_store plugin from OpenClaw and select the engine used before it.

    The database and every session in it are kept; OpenClaw's own
    transcripts were never changed.

    \b
    Example:
        nexus-store openclaw uninstall
    """
    command = _openclaw_command(openclaw_cmd)
    if command is None:
        click.echo("OpenClaw is not on PATH (or pass --openclaw CMD). To uninstall by hand, run:")
        click.echo(f"  openclaw plugins uninstall {PLUGIN_ID} --force --keep-files")
        click.echo("  openclaw config set plugins.slots.contextEngine legacy")
        ctx.exit(1)
    previous = (
        _config_get(command, f"plugins.entries.{PLUGIN_ID}.config.previousEngine") or "legacy"
    )
    database = _config_get(command, f"plugins.entries.{PLUGIN_ID}.config.db")
    _run(command, "plugins", "uninstall", PLUGIN_ID, "--force", "--keep-files")
    _run(command, "config", "set", "plugins.slots.contextEngine", str(previous))
    result = {"contextEngine": previous, "database": database}
    if as_json:
        echo_json(result)
    else:
        click.echo(f"uninstalled {PLUGIN_ID}; context engine: {previous}")
        if database:
            click.echo(f"the sessions stay in {database}")
