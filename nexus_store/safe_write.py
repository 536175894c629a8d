"""Writing a file the user named without following planted links (issue 18, item 2).

Exports hold transcripts, and transcripts hold secrets. A file is written to a new
temporary file *beside* the target, created exclusively (``O_CREAT | O_EXCL``) without
following a symbolic link (``O_NOFOLLOW``), readable by its owner only (0600 whatever
the umask), flushed to disk, then renamed over the target. A link planted at the
temporary name or at the target is never written through: the rename replaces the
link itself, and the exclusive create refuses any existing name. A failed write
leaves the target as it was and removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from nexus_store.errors import NexusError

__all__ = ["create_beside", "private_text_file"]

_FLAGS = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def create_beside(target: Path) -> tuple[int, Path]:
    """A new 0600 file beside ``target``, created exclusively without following links.

    Returns:
        ``(open file descriptor, its path)``.

    Raises:
        NexusError: If the directory is missing or not writable.
    """
    for _attempt in range(20):
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
        try:
            return os.open(temporary, _FLAGS, 0o600), temporary
        except FileExistsError:
            continue  # somebody's file (or link) has this name: never touch it
        except FileNotFoundError:
            raise NexusError(
                f"cannot write {target}: the directory {target.parent} does not exist"
            ) from None
        except PermissionError:
            raise NexusError(
                f"cannot write {target}: the directory {target.parent} is not writable"
            ) from None
        except OSError as err:
            raise NexusError(f"cannot write {target}: {err.strerror}") from None
    raise NexusError(f"cannot create a temporary file beside {target}; try again")


@contextlib.contextmanager
def private_text_file(target: str | Path) -> Iterator[TextIO]:
    """A text handle whose content replaces ``target`` when the block ends without error.

    Args:
        target: The file to create or replace.

    Yields:
        A UTF-8 text handle (Unix line ends) on a new 0600 file beside the target.

    Raises:
        NexusError: If the directory is missing or not writable, or the target is a
            directory.
    """
    target = Path(target)
    if target.is_dir():
        raise NexusError(f"cannot write {target}: it is a directory; give a file path")
    fd, temporary = create_beside(target)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask did
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
