"""What every command shares: the database option, output options, opening the store."""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from nexus_store.errors import NexusError
from nexus_store.store.driver_errors import is_driver_error, translate
from nexus_store.store.urls import is_postgres_url

if TYPE_CHECKING:
    from nexus_store.store import Store
    from nexus_store.store.db import Handle

__all__ = [
    "CONTEXT_SETTINGS",
    "NexusGroup",
    "database_target",
    "default_db_path",
    "echo",
    "echo_json",
    "echo_json_text",
    "json_option",
    "open_handle",
    "open_store",
    "print_table",
    "terminal_safe",
]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

# Characters a terminal acts on instead of showing: C0 controls but newline and tab,
# DEL, C1 controls (\x9b is a one-byte CSI), and the bidirectional overrides that
# reorder what is shown. Transcripts hold whatever tools printed (issue 15: `tree`
# sent a transcript's escape sequences to the terminal).
_UNSAFE = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
# What JSON leaves raw with ensure_ascii=False (it escapes C0 itself).
_JSON_UNSAFE = "[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
# Every character of both is a control (Cc) or format (Cf) character, which
# `str.isprintable` rejects: a printable text has none, and the patterns are compiled
# for the first text that is not (compiling both cost ~1 ms at every start; issue 17).


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """Text with every character a terminal would act on shown as an escape (``\\x1b``).

    Every human-readable line the CLI prints goes through here (`echo`, `print_table`
    and the error line), so a transcript cannot move the cursor, recolour, retitle or
    clear the terminal, or reorder text with bidirectional overrides.

    Example:
        >>> terminal_safe("ok\\x1b[2Jgone")
        'ok\\\\x1b[2Jgone'
    """
    if text.isprintable():
        return text
    return _pattern(_UNSAFE).sub(_escape, text)


def echo(message: str = "", *, err: bool = False) -> None:
    """Print a human-readable line, terminal-safe (see `terminal_safe`)."""
    click.echo(terminal_safe(message), err=err)


F = TypeVar("F", bound=Callable[..., Any])


def default_db_path() -> Path:
    """``$NEXUS_STORE_DB``, else ``$XDG_DATA_HOME/nexus_store/sessions.db`` (~/.local/share)."""
    env = os.environ.get("NEXUS_STORE_DB")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "nexus_store" / "sessions.db"


class NexusGroup(click.Group):
    """A click group that turns every NexusError into one line on stderr and exit code 1.

    Its commands can be named lazily (``lazy_commands={"name": "module:attribute"}``):
    a command's module is imported when that command runs or its help is shown, so
    ``nexus-store context status`` does not import the importers, the service or
    the summarizers (issue 17: start-up). `commands` (every command, imported)
    stays what click's own groups offer, for tools and tests that walk the tree.

    Args:
        lazy_commands: Command name -> ``"package.module:attribute"`` of the command.
        **kwargs: As for `click.Group`.
    """

    def __init__(
        self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        self._lazy = dict(lazy_commands or {})
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every command by name (importing those not imported yet)."""
        for name in list(self._lazy):
            self._load(name)
        return self._commands

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._commands = value

    def _load(self, name: str) -> click.Command:
        module, _, attribute = self._lazy.pop(name).partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attribute} is not a click command")
        self._commands[name] = command
        return command

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command of this name (its module imported now if it was not), or None."""
        if cmd_name in self._lazy:
            return self._load(cmd_name)
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The command names, sorted (nothing is imported)."""
        return sorted({*self._commands, *self._lazy})

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command, mapping library errors to ClickException once, here.

        A warning of the library (a database readable by other users) is one line on
        stderr, not Python's ``file:line: UserWarning`` with a line of source (issue 15).
        """
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line_warning
                return super().invoke(ctx)
        except NexusError as err:
            raise click.ClickException(terminal_safe(str(err))) from None
        except KeyboardInterrupt:
            # Ctrl-C: the open transaction rolled back as the exception left it (click's
            # own handler would print "Aborted!" and exit 1; issue 15).
            echo(
                "interrupted: the write in progress was rolled back and nothing of it was "
                "stored (an import keeps the files it finished before)",
                err=True,
            )
            ctx.exit(130)
        except BrokenPipeError:  # `nexus-store ... | head`
            sys.stderr.close()
            return None
        except Exception as err:
            if not is_driver_error(err):
                raise
            # a driver error no choke point translated (issue 18): still one line
            where = f"nexus-store {ctx.invoked_subcommand or ''}".strip()
            raise click.ClickException(terminal_safe(str(translate(err, where)))) from None


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    echo(f"warning: {message}", err=True)


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
    from nexus_store.store import Store  # not at import: `--help` needs no store

    target = _database(ctx, create=create)
    if isinstance(target, str):  # a postgresql:// URL
        url_store = Store(target)
        ctx.call_on_close(url_store.close)
        return url_store
    store = Store(target, counter=ctx.find_root().params.get("counter"))
    ctx.call_on_close(store.close)
    return store


def open_handle(ctx: click.Context) -> Handle:
    """Open the database named by --db as a bare `Handle`, closing it when the command ends.

    For a command that reads with the store's functions rather than a `Store`
    (`context status`): the database is opened, checked and migrated as `open_store`
    does, but the facade and its parts are not imported (issue 17: start-up).
    """
    from nexus_store.store import opening

    target = _database(ctx, create=False)
    counter = None if isinstance(target, str) else ctx.find_root().params.get("counter")
    handle = opening.open_handle(target, counter=counter)
    ctx.call_on_close(handle.close)
    return handle


def _database(ctx: click.Context, *, create: bool) -> Path | str:
    target: Path | str = ctx.find_root().params["db"] or default_db_path()
    if isinstance(target, str):  # a postgresql:// URL
        return target
    if not target.exists():
        if not create:
            raise click.ClickException(
                f"no database at {target}; import a transcript first (nexus-store import FILE) "
                "or point --db / NEXUS_STORE_DB at one"
            )
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return target


def json_option(func: F) -> F:
    """Add ``--json``: print JSON instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def echo_json(value: Any) -> None:
    """Print a value as indented JSON (non-ASCII kept)."""
    echo_json_text(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def echo_json_text(text: str) -> None:
    """Print JSON text with the terminal-active characters JSON leaves raw escaped (``\\u009b``)."""
    if not text.isprintable():
        text = _pattern(_JSON_UNSAFE).sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    click.echo(text)


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[Any]], *, max_width: int = 60
) -> None:
    """Print rows as an aligned plain-text table, cells cut at ``max_width`` characters."""
    cells = [[_cell(v, max_width) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    echo("  ".join("-" * w for w in widths))
    for row in cells:
        echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: Any, max_width: int) -> str:
    text = "" if value is None else str(value)
    text = terminal_safe(text.replace("\n", " ").replace("\t", " "))
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def pass_store(func: F) -> F:
    """Give the command an open Store as its first argument."""

    @click.pass_context
    @functools.wraps(func)
    def wrapper(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        return ctx.invoke(func, open_store(ctx), *args, **kwargs)

    return wrapper  # type: ignore[return-value]
