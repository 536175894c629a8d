"""What every command shares: the database option, output options, opening the store."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from nexus_store.errors import NexusError
from nexus_store.store import Store
from nexus_store.store.driver_errors import is_driver_error, translate
from nexus_store.store.pg import is_postgres_url

__all__ = [
    "CONTEXT_SETTINGS",
    "NexusGroup",
    "database_target",
    "default_db_path",
    "echo_json",
    "json_option",
    "open_store",
    "print_table",
]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
F = TypeVar("F", bound=Callable[..., Any])


def default_db_path() -> Path:
    """``$NEXUS_STORE_DB``, else ``$XDG_DATA_HOME/nexus_store/sessions.db`` (~/.local/share)."""
    env = os.environ.get("NEXUS_STORE_DB")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "nexus_store" / "sessions.db"


class NexusGroup(click.Group):
    """A click group that turns every NexusError into one line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, mapping library errors to ClickException once, here."""
        try:
            return super().invoke(ctx)
        except NexusError as err:
            raise click.ClickException(str(err)) from None
        except Exception as err:
            if not is_driver_error(err):
                raise
            # a driver error no choke point translated (issue 18): still one line
            where = f"nexus-store {ctx.invoked_subcommand or ''}".strip()
            raise click.ClickException(str(translate(err, where))) from None
        except BrokenPipeError:  # `nexus-store ... | head`
            sys.stderr.close()
            return None


def database_target(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> Path | str | None:
    """Option callback: a database file as a Path, a ``postgresql://`` URL kept as text.

    (A Path would fold a URL's ``//``; issue 8.)
    """
    if value is None or is_postgres_url(value):
        return value
    path = Path(value)
    if path.is_dir():
        raise click.BadParameter(f"{value!r} is a directory; give the path of a database file")
    return path


def open_store(ctx: click.Context, *, create: bool = False) -> Store:
    """Open the database named by --db (or the default), closing it when the command ends."""
    target: Path | str = ctx.find_root().params["db"] or default_db_path()
    if isinstance(target, str):  # a postgresql:// URL
        url_store = Store(target)
        ctx.call_on_close(url_store.close)
        return url_store
    path = target
    if not path.exists():
        if not create:
            raise click.ClickException(
                f"no database at {path}; import a transcript first (nexus-store import FILE) "
                "or point --db / NEXUS_STORE_DB at one"
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = Store(path, counter=ctx.find_root().params.get("counter"))
    ctx.call_on_close(store.close)
    return store


def json_option(func: F) -> F:
    """Add ``--json``: print JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def echo_json(value: Any) -> None:
    """Print a value as indented JSON (non-ASCII kept)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, max_width: int = 60
) -> None:
    """Print rows as an aligned plain-text table, cells cut at ``max_width`` characters."""
    cells = [[_cell(v, max_width) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: Any, max_width: int) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def pass_store(func: F) -> F:
    """Give the command an open Store as its first argument."""

    @click.pass_context
    @functools.wraps(func)
    def wrapper(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        return ctx.invoke(func, open_store(ctx), *args, **kwargs)

    return wrapper  # type: ignore[return-value]
