"""Read-only SQL over a database: the door behind ``nexus-store sql``.

Three locks, so that no statement can change the file: the connection is opened
``mode=ro``; ``PRAGMA query_only`` is on; and an authorizer allows only reads
(SELECT, recursive CTEs, functions other than ``load_extension``, a list of
harmless PRAGMAs: those that only report, and those whose argument names a table
or an index, as ``table_info('turns')``, also as table-valued functions like
``pragma_table_info('turns')``). Statements that start with a keyword of a
statement that is not a query (VACUUM INTO writes a new file even from a read-only
connection) are refused before they run; anything else goes to SQLite, whose own
message reports a syntax error.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlite_utils.db import quote_identifier

from nexus_store.errors import InvalidArgument, QueryTimeout, ReadOnlyError, StoreOpenError
from nexus_store.store.connection import check_existing, connect_read_only
from nexus_store.store.pg import is_postgres_url, refuse_unless_query, run_readonly_pg

__all__ = ["DEFAULT_TIMEOUT", "run_readonly"]

_ALLOWED_FIRST = {"select", "with", "values", "explain", "pragma"}
# First keywords of every SQLite statement: a word outside this set is no statement
# at all, and SQLite's parser says so ("near "selec": syntax error").
_STATEMENTS = frozenset(
    "alter analyze attach begin commit create delete detach drop end explain insert pragma "
    "reindex release replace rollback savepoint select update vacuum values with".split()
)
# PRAGMAs whose argument names a table, an index or a schema (or a row limit): they
# read with it. Any other PRAGMA with an argument sets a value and is refused.
_NAME_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
}
_READ_PRAGMAS = _NAME_PRAGMAS | {
    "database_list",
    "function_list",
    "pragma_list",
    "collation_list",
    "compile_options",
    "page_count",
    "page_size",
    "freelist_count",
    "user_version",
    "data_version",
    "schema_version",
    "journal_mode",
    "encoding",
    "module_list",
}
_WRITE_ACTIONS = (
    "INSERT UPDATE DELETE ATTACH DETACH CREATE_TABLE CREATE_INDEX CREATE_VIEW CREATE_TRIGGER "
    "CREATE_TEMP_TABLE CREATE_TEMP_VIEW CREATE_TEMP_TRIGGER CREATE_TEMP_INDEX CREATE_VTABLE "
    "DROP_TABLE DROP_INDEX DROP_VIEW DROP_TRIGGER DROP_VTABLE DROP_TEMP_TABLE ALTER_TABLE "
    "REINDEX ANALYZE TRANSACTION SAVEPOINT"
).split()
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ")
    for name in _WRITE_ACTIONS
    if hasattr(sqlite3, f"SQLITE_{name}")
}
_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
# Functions that load code, touch files, or hand out a pointer into the process
# (fts3_tokenizer('simple') returns the address of a C struct: issue 18; fts5() too).
_DENIED_FUNCTIONS = {
    "load_extension",
    "readfile",
    "writefile",
    "edit",
    "fts3_tokenizer",
    "fts5",
    "sqlite_dbpage",
}
DEFAULT_TIMEOUT = 30.0
"""Seconds a ``sql`` query may run (``--timeout``); a runaway recursive CTE stops there."""


class _Guard:
    def __init__(self) -> None:
        self.denied: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() in _DENIED_FUNCTIONS:
                self.denied = f"the function {arg2}()"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _READ_PRAGMAS and (arg2 is None or name in _NAME_PRAGMAS):
                return sqlite3.SQLITE_OK
            self.denied = f"PRAGMA {arg1}" + (f" = {arg2}" if arg2 is not None else "")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
            # Connecting a virtual table (pragma_table_info(...), an FTS5 index) reads
            # its declaration, which the authorizer reports as an UPDATE of
            # sqlite_master; the read-only connection and query_only stop real writes.
            return sqlite3.SQLITE_OK
        self.denied = _ACTION_NAMES.get(action, f"action {action}").upper()
        return sqlite3.SQLITE_DENY


def _connect_virtual_tables(conn: sqlite3.Connection) -> None:
    """Connect each virtual table (the FTS5 search indexes) before the authorizer is set.

    Connecting an FTS5 table parses its declaration, which the authorizer sees as an
    UPDATE of sqlite_master; done first, queries on the indexes see only reads.
    """
    names = conn.execute(
        "select name from sqlite_master where type = 'table' and sql like 'create virtual table%'"
    ).fetchall()
    for (name,) in names:
        conn.execute(f"select 1 from {quote_identifier(name)} where 0").fetchall()


def run_readonly(
    path: str | Path,
    sql: str,
    params: Sequence[Any] | dict[str, Any] = (),
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """Run one read-only query.

    Args:
        path: The database file.
        sql: One SQL query (SELECT, WITH ... SELECT, VALUES, EXPLAIN, read PRAGMAs).
        params: Values bound to ``?`` or ``:name`` placeholders.
        timeout: Seconds the query may run, fetching included (> 0).

    Returns:
        ``(column names, row iterator)``; the connection closes when the rows are consumed.

    Raises:
        ReadOnlyError: If the statement would write, attach, load code, or returns no rows.
        QueryTimeout: If it runs longer than ``timeout`` (raised while rows are read).
        StoreOpenError: If the file is missing or not a SQLite database.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidArgument(f"sql timeout must be a number of seconds > 0, not {timeout!r}")
    if is_postgres_url(path):
        return run_readonly_pg(str(path), sql, params, timeout=timeout)
    file = Path(path)
    if not file.exists():
        raise StoreOpenError(f"no database at {file}")
    check_existing(file)
    refuse_unless_query(
        sql, _ALLOWED_FIRST, "SELECT, WITH, VALUES, EXPLAIN and read PRAGMAs", _STATEMENTS
    )
    if "messages_fts" in sql.lower():
        # the messages not yet indexed for search are, first, if the write lock is free
        # at once; otherwise the index may lag them (docs/search.md). (Imported here:
        # other queries need none of the write path.)
        from nexus_store.store.indexqueue import index_file_tail

        index_file_tail(file)
    conn = connect_read_only(file, timeout=5.0)
    deadline = time.monotonic() + timeout
    try:
        conn.execute("pragma query_only = on")
        _connect_virtual_tables(conn)
    except sqlite3.DatabaseError as err:
        conn.close()
        raise StoreOpenError(f"cannot read {file}: {err}") from None
    guard = _Guard()
    try:
        conn.set_authorizer(guard)
        # a runaway query (a recursive CTE without end) is interrupted at the deadline
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cursor = conn.execute(sql, params)
    except sqlite3.Warning:  # "You can only execute one statement at a time."
        conn.close()
        raise ReadOnlyError(
            "sql runs one statement at a time; the database was not changed"
        ) from None
    except sqlite3.DatabaseError as err:
        conn.close()
        if "one statement at a time" in str(err):
            raise ReadOnlyError(
                "sql runs one statement at a time; the database was not changed"
            ) from None
        if "interrupted" in str(err):
            raise _timed_out(timeout) from None
        if guard.denied or "not authorized" in str(err) or "readonly" in str(err).lower():
            what = guard.denied or "writing"
            raise ReadOnlyError(
                f"sql is read-only: {what} is refused; the database was not changed"
            ) from None
        raise ReadOnlyError(f"sql error: SQLite says: {err}") from None
    if cursor.description is None:
        conn.close()
        raise ReadOnlyError("sql is read-only: the statement returns no rows and was refused")
    columns = [d[0] for d in cursor.description]

    def rows() -> Iterator[tuple[Any, ...]]:
        try:
            yield from cursor
        except sqlite3.Error as err:  # (a damaged page shows while rows are read)
            if "interrupted" in str(err):
                raise _timed_out(timeout) from None
            raise ReadOnlyError(f"sql error: {err}") from None
        finally:
            conn.close()

    return columns, rows()


def _timed_out(timeout: float) -> QueryTimeout:
    return QueryTimeout(
        f"sql stopped the query after {timeout:g}s (a recursive CTE without an end, or a "
        "large join?); nothing was changed: add a LIMIT or a stop condition, or give "
        "--timeout more seconds"
    )
