"""Errors raised by nexus_store.

Every error is a `NexusError`, so callers can catch one type. A message says what
failed, names the value, and says what to do. The CLI turns each into one line on
stderr and exit code 1; the library never prints or exits.
"""

from __future__ import annotations

__all__ = [
    "ConflictError",
    "ConstraintViolation",
    "ContentCorrupt",
    "CounterMismatch",
    "DanglingLeaf",
    "DatabaseBusy",
    "DatabaseCorrupt",
    "DatabaseLocked",
    "DiskFull",
    "DriverLimitExceeded",
    "InvalidArgument",
    "InvalidEntry",
    "InvalidQuery",
    "NexusError",
    "QueryTimeout",
    "ReadOnlyError",
    "SchemaOutOfDate",
    "SessionNotFound",
    "StorageError",
    "StoreOpenError",
    "SummarizerError",
    "TranscriptError",
    "TurnNotFound",
]


class NexusError(Exception):
    """Base class of every error nexus_store raises on purpose."""


class SessionNotFound(NexusError, KeyError):
    """No session has the given id."""

    def __str__(self) -> str:
        # KeyError.__str__ would quote the message; keep it readable.
        return str(self.args[0]) if self.args else "session not found"


class TurnNotFound(NexusError, KeyError):
    """No turn with the given id exists in the session."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "turn not found"


class InvalidEntry(NexusError, ValueError):
    """An entry or message given to an append method breaks the model's rules."""


class InvalidArgument(NexusError, ValueError):
    """An argument is out of range or of the wrong type (a negative token budget, ...)."""


class InvalidQuery(NexusError, ValueError):
    """A search query is not valid FTS5 syntax, or a search argument is out of range."""


class QueryTimeout(NexusError):
    """A read-only ``sql`` query ran longer than its time limit and was stopped."""


class ConflictError(NexusError):
    """Stored data disagrees with what is being written (same id, different content)."""


class SchemaOutOfDate(NexusError):
    """The database was written by a newer nexus_store than this one."""


class StoreOpenError(NexusError):
    """The path cannot be opened as a nexus_store database."""


class TranscriptError(NexusError):
    """A transcript line cannot be read; carries the file and line number."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path is not None and line is not None else ""
        super().__init__(f"{where}{message}")


class SummarizerError(NexusError):
    """A summarizer could not produce a summary; carries the HTTP status if there was one."""

    def __init__(self, message: str, *, status_code: int | None = None):
        self.status_code = status_code
        super().__init__(message)


class ReadOnlyError(NexusError):
    """A write was refused: the read-only `sql` door, or a file or folder the user cannot write."""


class DanglingLeaf(NexusError):
    """A session's active leaf points at no turn (`doctor --fix` repairs it)."""


class StorageError(NexusError):
    """The database driver failed; carries where, and the message says what to do.

    Raised for every sqlite3 or psycopg error that reaches a caller (issue 18), so
    callers catch one type. Subclasses name the conditions a user can act on.

    Attributes:
        where: The database file or server (password removed), or what was being done on it.
    """

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(message)


class DiskFull(StorageError):
    """The disk (or the database's size limit) is full; nothing committed was lost."""


class DatabaseCorrupt(StorageError):
    """The database file is damaged (malformed pages, not a database)."""


class ContentCorrupt(DatabaseCorrupt):
    """A message's compressed content cannot be read back (a damaged blob); names the message."""


class DriverLimitExceeded(StorageError, ValueError):
    """A value is larger than the database driver accepts (string too big, index row size)."""


class DatabaseBusy(StorageError):
    """Another writer held the database (a file or a server's row lock) too long; retry.

    Its own class so that callers can retry this and nothing else (issue 14); it
    replaces the plain `NexusError` raised before, so old ``except`` clauses still
    catch it. `DatabaseLocked` (issue 18's name) is the same class.

    Attributes:
        where: The database file or server (password removed) that was busy.
    """

    retryable = True


DatabaseLocked = DatabaseBusy
"""Another name of `DatabaseBusy` (one concept: a lock held too long; retryable)."""


class CounterMismatch(NexusError):
    """The database stores token counts made by another counter than the one asked for.

    Attributes:
        where: The database file or server.
        recorded: The counter the database was created with.
        requested: The counter asked for.
    """

    def __init__(self, message: str, *, where: str | None, recorded: str, requested: str) -> None:
        super().__init__(message)
        self.where = where
        self.recorded = recorded
        self.requested = requested


class ConstraintViolation(ConflictError):
    """A write broke a uniqueness or link rule of the schema (a driver's integrity error).

    The store catches it where a taken id is expected and reports it in its own
    words; one that escapes names the rule the database enforced. It is a
    `ConflictError` (issue 18: the database refused the write; nothing of it was stored).
    """
