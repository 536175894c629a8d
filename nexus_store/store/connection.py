"""Opening a database file safely: checks, permissions, pragmas, migrations.

A new file is created readable by its owner only (transcripts hold secrets; SQLite
gives the -wal and -shm files the same mode). An existing path must be a SQLite
database that is empty of tables or already a nexus_store database: an empty
file, another format, or somebody else's database is refused with a clear message
before anything is written to it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import warnings
from pathlib import Path

from nexus_store.errors import StoreOpenError
from nexus_store.store.driver_errors import TranslatingConnection

__all__ = ["SQLITE_HEADER", "check_existing", "connect", "create_private", "warn_if_shared"]

SQLITE_HEADER = b"SQLite format 3\x00"


def check_existing(path: Path) -> None:
    """Refuse an existing path that is not a SQLite database.

    Raises:
        StoreOpenError: If the path is a directory, an empty file or not SQLite.
    """
    if path.is_dir():
        raise StoreOpenError(f"{path} is a directory; give the path of a database file")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except PermissionError:
        raise StoreOpenError(f"cannot read {path}: permission denied") from None
    if not head:
        raise StoreOpenError(
            f"{path} is an empty file, not a nexus_store database; remove it or choose another path"
        )
    if head != SQLITE_HEADER:
        raise StoreOpenError(
            f"{path} is not a SQLite database (it does not start with the SQLite header); "
            "choose another path"
        )


def warn_if_shared(path: Path) -> None:
    """Warn when a database file is readable by other users (transcripts hold secrets)."""
    if path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH):
        warnings.warn(
            f"{path} is readable by other users; transcripts hold secrets: chmod 600 {path}",
            stacklevel=4,
        )


def create_private(path: Path) -> None:
    """Create an empty file readable and writable by its owner only.

    Raises:
        StoreOpenError: If the directory is missing or not writable.
    """
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise StoreOpenError(f"cannot create {path}: the directory {parent} does not exist")
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    except PermissionError:
        raise StoreOpenError(
            f"cannot create {path}: the directory {parent} is not writable"
        ) from None
    except OSError as err:
        raise StoreOpenError(f"cannot create {path}: {err.strerror}") from None
    os.close(fd)


def connect(target: str, *, timeout: float, uri: bool = False) -> sqlite3.Connection:
    """Open a connection in driver autocommit mode (the store issues BEGIN itself).

    Raises:
        StoreOpenError: If SQLite cannot open the file.
    """
    try:
        conn = sqlite3.connect(
            target,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=uri,
            factory=TranslatingConnection,  # driver errors -> nexus errors (issue 18)
        )
    except sqlite3.Error as err:
        raise StoreOpenError(f"cannot open {target}: {err}") from None
    conn.where = target
    return conn
