"""Opening a database file safely: checks, permissions, pragmas, migrations.

A new file is created readable by its owner only (transcripts hold secrets; SQLite
gives the -wal and -shm files the same mode). An existing path must be a SQLite
database that is empty of tables or already a nexus_store database: an empty
file, another format, or somebody else's database is refused with a clear message
before anything is written to it. A database this process cannot write (a
read-only file, or a read-only folder where SQLite cannot make its -wal and -shm
files) is opened read-only, so that reading works and a write names the reason
(issue 15, item 5).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import warnings
from pathlib import Path

from nexus_store.errors import StorageError, StoreOpenError
from nexus_store.store import compressed
from nexus_store.store.driver_errors import TranslatingConnection

__all__ = [
    "DEFAULT_WAL_LIMIT",
    "SQLITE_HEADER",
    "check_existing",
    "connect",
    "connect_read_only",
    "create_private",
    "read_only_reason",
    "warn_if_shared",
]

SQLITE_HEADER = b"SQLite format 3\x00"
DEFAULT_WAL_LIMIT = 64 * 1024 * 1024
"""A WAL larger than this (bytes) is reported by `Store.doctor` (checkpointed with ``fix``)."""


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


def read_only_reason(path: Path) -> str | None:
    """Why this process cannot write an existing database file, or None when it can.

    Args:
        path: An existing database file.

    Returns:
        A phrase naming the file or folder and why (for an error message), or None.
    """
    if not os.access(path, os.W_OK):
        mode = stat.filemode(path.stat().st_mode)
        return f"the file {path} is read-only for this user ({mode})"
    folder = path.parent if str(path.parent) else Path(".")
    if not os.access(folder, os.W_OK | os.X_OK):
        # SQLite writes through -wal and -shm files beside the database; where they
        # exist and are writable a read-only folder does not matter.
        sidecars = (path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))
        if not all(os.access(sidecar, os.W_OK) for sidecar in sidecars):
            return (
                f"the folder {folder} is not writable (SQLite needs to create "
                f"{path.name}-wal and {path.name}-shm beside the database)"
            )
    return None


def connect_read_only(path: Path, *, timeout: float) -> sqlite3.Connection:
    """Open an existing database read-only, even in a folder where SQLite cannot write.

    ``mode=ro`` reads a WAL database when its -shm file exists or can be made; in a
    read-only folder without one, only ``immutable=1`` opens it (nobody can be
    writing it there either, since a writer would need the same files).

    Raises:
        StoreOpenError: If SQLite cannot read the file.
    """
    base = path.resolve().as_uri()
    last: Exception | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        conn = connect(f"{base}?{query}", timeout=timeout, uri=True)
        try:
            conn.execute("select count(*) from sqlite_master").fetchone()
        except (sqlite3.DatabaseError, StorageError) as err:  # (translated: issue 18)
            conn.close()
            last = err
            continue
        return conn
    raise StoreOpenError(f"cannot read {path}: {last}")


def warn_if_shared(path: Path) -> None:
    """Warn when a database file of this user is readable by others (transcripts hold secrets).

    Somebody else's file is not warned about: its reader cannot change its mode.
    """
    info = path.stat()
    mine = not hasattr(os, "geteuid") or info.st_uid == os.geteuid()
    if info.st_mode & (stat.S_IRGRP | stat.S_IROTH) and mine:
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
            # appends name only the columns that hold a value, so a store prepares a
            # statement per shape of row (sql.insert_rows_sql): keep them all prepared
            cached_statements=512,
        )
    except sqlite3.Error as err:
        raise StoreOpenError(f"cannot open {target}: {err}") from None
    conn.where = target
    # A trigger's own writes fire triggers too (sqlite-utils' default, which the store
    # had while it opened every connection through sqlite_utils.Database).
    conn.execute("pragma recursive_triggers=on")
    compressed.register(conn)  # compressed message content reads back in SQL (issue 17)
    return conn
