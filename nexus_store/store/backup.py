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

from nexus_store.errors import NexusError
from nexus_store.safe_write import create_beside

__all__ = ["backup_sqlite"]


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
