"""`nexus-store backup`: a whole, consistent copy of a SQLite store in one file.

Copying ``sessions.db`` alone is not a backup while the store is open: committed
data may still sit in ``sessions.db-wal`` until the next checkpoint (issue 18). This
copies through SQLite's online backup API, which reads one consistent snapshot
(WAL included) while writers go on, into a new file created exclusively beside the
destination (0600, no link followed), switches the copy to a rollback journal so it
stands alone, checks it (``quick_check``), flushes it to disk and renames it over
the destination. An existing destination is replaced only when asked.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from nexus_store.errors import NexusError
from nexus_store.safe_write import create_beside

if TYPE_CHECKING:
    from nexus_store.store.db import Handle

__all__ = ["Backup", "backup_sqlite"]


class Backup:
    """`Store.backup` (a part): a whole copy of a SQLite file; PostgreSQL has pg_dump."""

    def __init__(self, db: Handle) -> None:
        self.db = db

    def backup(self, dest: str | Path, *, force: bool = False) -> int:
        """Write a whole, consistent copy of the database to ``dest`` (0600).

        Returns:
            The backup's size in bytes.

        Raises:
            NexusError: If ``dest`` exists (without ``force``) or cannot be written, the
                store is in memory, or it is on PostgreSQL (use pg_dump there).
        """
        if self.db.dialect.name != "sqlite":
            raise NexusError(
                "backup copies a SQLite file; on PostgreSQL use pg_dump (or `nexus-store copy "
                "--to FILE.db` for a SQLite copy of the sessions)"
            )
        return backup_sqlite(self.db.conn, dest, force=force)


def backup_sqlite(conn: sqlite3.Connection, dest: str | Path, *, force: bool = False) -> int:
    """Copy the database behind ``conn`` into the file ``dest``.

    Args:
        conn: The store's connection.
        dest: The backup file to create.
        force: Replace ``dest`` if it exists.

    Returns:
        The size of the backup in bytes.

    Raises:
        NexusError: If ``dest`` exists (without ``force``), is a directory, or its
            directory is missing; or the copy fails its check.
    """
    target = Path(dest)
    if target.is_dir():
        raise NexusError(f"backup destination {target} is a directory; give a file path")
    if (target.exists() or target.is_symlink()) and not force:
        raise NexusError(
            f"backup destination {target} exists; give --force to replace it, or another path"
        )
    fd, temporary = create_beside(target)
    os.close(fd)
    copy: sqlite3.Connection | None = None
    try:
        copy = sqlite3.connect(temporary, isolation_level=None)
        conn.backup(copy)
        copy.execute("pragma journal_mode=delete")  # one self-contained file
        check = copy.execute("pragma quick_check").fetchone()[0]
        copy.close()
        copy = None
        if check != "ok":
            raise NexusError(f"the backup failed its check ({check}); {target} was not written")
        with open(temporary, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        if copy is not None:
            copy.close()
        for leftover in (temporary, Path(f"{temporary}-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    return target.stat().st_size
