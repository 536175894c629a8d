"""Driver errors -> nexus_store errors: the one place that knows what they mean.

Every sqlite3 or psycopg error that would reach a caller passes through `translate`
(issue 18: a full disk, a damaged page and a driver limit gave raw tracebacks). The
result is a `StorageError` subclass whose message says what failed, where, and what
to do. Nothing here writes: by the time an error is translated, the transaction it
broke has been (or is being) rolled back, so what was committed before is intact.

Its callers (issue 14's layering):

* each dialect's ``translate_error`` (`SqliteDialect.translate_error`,
  `pg.translate_error`), which `Handle.execute` calls for every statement: a busy
  lock becomes `DatabaseBusy` (waited for by `Handle.atomic`), a broken uniqueness
  rule `ConstraintViolation` (a generated id that collides is drawn again), and the
  *environmental* conditions (`is_environmental`) their `StorageError`; other SQLite
  errors (a SQL error the store recognizes, such as FTS5 syntax) are left to the part
  that ran the statement;
* `TranslatingConnection` for SQLite, so that a damaged page met while rows are
  *fetched* (after `Handle.execute` returned the cursor) is translated too;
* the outermost transaction (`Handle.atomic`) and the CLI, which translate whatever
  driver error still escapes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from nexus_store.errors import (
    ConstraintViolation,
    DatabaseBusy,
    DatabaseCorrupt,
    DiskFull,
    DriverLimitExceeded,
    NexusError,
    StorageError,
)
from nexus_store.store import compressed

__all__ = [
    "TranslatingConnection",
    "TranslatingCursor",
    "is_busy",
    "is_driver_error",
    "is_environmental",
    "translate",
]

_NOTHING_LOST = "what was committed before is intact"
# SQLite primary result codes (the low byte of an extended code) that no store code
# handles itself: they go to the caller, translated, from the statement that met them.
_ENVIRONMENTAL = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_TOOBIG,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_CANTOPEN,
}
# PostgreSQL SQLSTATE classes and codes with the same meaning.
_PG_FULL = {"53100"}  # disk_full
_PG_CORRUPT = {"XX001", "XX002"}  # data_corrupted, index_corrupted
_PG_LIMIT_CLASS = "54"  # program_limit_exceeded and its kin
_PG_LOCK = {"55P03", "40P01"}  # lock_not_available, deadlock_detected


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_psycopg(exc: BaseException) -> bool:
    return any(cls.__module__.startswith("psycopg") for cls in type(exc).__mro__[:-2])


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a sqlite3 or psycopg error (and not already a nexus_store one)."""
    return isinstance(exc, sqlite3.Error) or (
        isinstance(exc, Exception) and not isinstance(exc, NexusError) and _is_psycopg(exc)
    )


def is_busy(exc: BaseException) -> bool:
    """Whether a driver error is a lock another writer held too long (retryable)."""
    if isinstance(exc, sqlite3.Error):
        text = str(exc).lower()
        return _sqlite_code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or (
            isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)
        )
    return getattr(exc, "sqlstate", None) in _PG_LOCK


def is_environmental(exc: BaseException) -> bool:
    """Whether a driver error is a condition of the disk, the file or a limit.

    These are translated at the statement that met them; the others (constraint
    violations, a busy lock, SQL errors the store recognizes such as FTS5 syntax) are
    left to the store's own handling and translated by the outermost transaction.
    """
    if isinstance(exc, sqlite3.Error):
        if isinstance(exc, sqlite3.DataError):  # "string or blob too big" when binding
            return True
        return _sqlite_code(exc) in _ENVIRONMENTAL
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and (
        state in _PG_FULL or state in _PG_CORRUPT or state.startswith(_PG_LIMIT_CLASS)
    )


def translate(exc: BaseException, where: str) -> NexusError:
    """The nexus_store error for a driver error met at ``where``.

    Args:
        exc: A sqlite3 or psycopg error (a `NexusError` is returned unchanged).
        where: What was being done, and on which database (e.g. ``"append to
            /data/s.db"``); it starts the message.

    Returns:
        A `StorageError` subclass (`DiskFull`, `DatabaseCorrupt`, `DriverLimitExceeded`,
        `DatabaseBusy` alias `DatabaseLocked`), or `ConstraintViolation` (a
        `ConflictError`) for a broken uniqueness or link rule.
    """
    if isinstance(exc, NexusError):
        return exc
    reason = _first_line(exc)
    state = getattr(exc, "sqlstate", None)
    code = _sqlite_code(exc)
    if code == sqlite3.SQLITE_FULL or state in _PG_FULL:
        return DiskFull(
            f"{where}: the disk is full ({reason}); nothing of this write was stored and "
            f"{_NOTHING_LOST}: free space on the disk (or move the database) and try again",
            where=where,
        )
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or state in _PG_CORRUPT:
        return DatabaseCorrupt(
            f"{where}: the database file is damaged ({reason}); run `nexus-store doctor` to "
            "see what, then restore it from a backup (`nexus-store backup` makes one) or "
            "recover it with sqlite3's .recover into a new file",
            where=where,
        )
    if (
        code == sqlite3.SQLITE_TOOBIG
        or isinstance(exc, sqlite3.DataError)
        or (isinstance(state, str) and state.startswith(_PG_LIMIT_CLASS))
    ):
        return DriverLimitExceeded(
            f"{where}: a value is larger than the database accepts ({reason}); nothing of "
            f"this write was stored and {_NOTHING_LOST}: shorten the value (an id or a "
            "field) and try again",
            where=where,
        )
    if is_busy(exc):
        return DatabaseBusy(
            f"{where}: the database is locked by another writer ({reason}); nothing of this "
            "write was stored: try again",
            where=where,
        )
    if code == sqlite3.SQLITE_IOERR:
        return StorageError(
            f"{where}: the disk reported an I/O error ({reason}); nothing of this write was "
            f"stored and {_NOTHING_LOST}: check the disk (a full disk shows this too) and "
            "try again",
            where=where,
        )
    if code == sqlite3.SQLITE_READONLY:
        return StorageError(
            f"{where}: the database cannot be written ({reason}); check the permissions of "
            "the file, its -wal and -shm files and their directory",
            where=where,
        )
    if code == sqlite3.SQLITE_CANTOPEN:
        return StorageError(
            f"{where}: the database file cannot be opened ({reason}); check that its "
            "directory exists and is writable",
            where=where,
        )
    if code == sqlite3.SQLITE_NOMEM:
        return StorageError(
            f"{where}: the database ran out of memory ({reason}); {_NOTHING_LOST}: free "
            "memory or work in smaller pieces",
            where=where,
        )
    if isinstance(exc, sqlite3.IntegrityError) or (
        isinstance(state, str) and state.startswith("23")
    ):
        return ConstraintViolation(
            f"{where}: the database refused the write ({reason}); nothing of it was stored"
        )
    if isinstance(state, str) and state.startswith("08"):
        return StorageError(
            f"{where}: the connection to PostgreSQL failed ({reason}); check that the server "
            "is up and try again",
            where=where,
        )
    return StorageError(
        f"{where}: database error ({reason}); nothing of this operation was stored and "
        f"{_NOTHING_LOST}: run `nexus-store doctor` if it repeats",
        where=where,
    )


def _escalate(err: sqlite3.Error, where: str) -> None:
    """Raise the nexus_store error a statement's SQLite error means, if it has one.

    A damaged compressed message fails inside a registered SQL function, which SQLite
    reports only as "user-defined function raised exception": the function recorded
    the error naming the message (`compressed.take_failure`, issue 17).
    """
    if is_environmental(err):
        raise translate(err, where) from err
    if isinstance(err, sqlite3.OperationalError) and "user-defined function" in str(err):
        failure = compressed.take_failure()
        if failure is not None:
            raise failure from None


class TranslatingCursor(sqlite3.Cursor):
    """A cursor whose environmental errors (`is_environmental`) become nexus_store errors.

    Damaged pages surface while rows are fetched, not only when a statement starts,
    so fetching is covered too.
    """

    def _where(self) -> str:
        return getattr(self.connection, "where", "the database")

    def execute(self, sql: str, parameters: Any = (), /) -> TranslatingCursor:
        """As `sqlite3.Cursor.execute`."""
        try:
            super().execute(sql, parameters)
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise
        return self

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> TranslatingCursor:
        """As `sqlite3.Cursor.executemany`."""
        try:
            super().executemany(sql, seq_of_parameters)
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise
        return self

    def fetchone(self) -> Any:
        """As `sqlite3.Cursor.fetchone`."""
        try:
            return super().fetchone()
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise

    def fetchall(self) -> list[Any]:
        """As `sqlite3.Cursor.fetchall`."""
        try:
            return super().fetchall()
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        """As `sqlite3.Cursor.fetchmany`."""
        try:
            return super().fetchmany(size if size is not None else self.arraysize)
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise

    def __iter__(self) -> TranslatingCursor:
        return self

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.Error as err:
            _escalate(err, self._where())
            raise


class TranslatingConnection(sqlite3.Connection):
    """The store's SQLite connection (``sqlite3.connect(factory=...)``).

    Its statements run on `TranslatingCursor`; ``where`` names the database in messages.
    """

    where = "the database"

    def cursor(self, factory: Any = TranslatingCursor) -> Any:
        """As `sqlite3.Connection.cursor`, with translating cursors by default."""
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """As `sqlite3.Connection.execute`."""
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any:
        """As `sqlite3.Connection.executemany`."""
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql: str, /) -> Any:
        """As `sqlite3.Connection.executescript`."""
        try:
            return super().executescript(sql)
        except sqlite3.Error as err:
            _escalate(err, self.where)
            raise
