"""The PostgreSQL driver: a psycopg 3 connection behind the methods the store calls.

The store's parts call ``execute``, ``executemany``, ``in_transaction`` and ``close``
on their connection (cursors: ``fetchone``, ``fetchall``, iteration, ``lastrowid``).
`PgConnection` offers them over psycopg, so the statements the backends share run
unchanged. Its only change to a statement is the parameter style (the paramstyle
of the driver, not a dialect): ``?`` becomes ``%s`` and ``:name`` becomes
``%(name)s`` (a literal ``%`` is doubled), outside quoted literals. The statements
whose text differs are written out in `nexus_store.store.sql` and chosen by
`nexus_store.store.dialect.PostgresDialect`; nothing here rewrites SQL.

`translate_error` maps psycopg's errors to nexus_store's; `Handle.execute` calls it
(through the dialect) for every statement, so no psycopg error reaches a caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nexus_store.errors import QueryTimeout, ReadOnlyError, StoreOpenError
from nexus_store.store.driver_errors import translate as _translate
from nexus_store.store.urls import is_postgres_url, redact

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "PgConnection",
    "connect",
    "driver_errors",
    "is_postgres_url",
    "redact",
    "refuse_unless_query",
    "run_readonly_pg",
    "translate",
    "translate_error",
]

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|:\w+|\?|%", re.DOTALL)
_CACHE: dict[str, str] = {}


def _placeholders(sql: str) -> str:
    def swap(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        if token.startswith(":") and token != "::":
            return f"%({token[1:]})s"
        if token.startswith("'"):
            return token.replace("%", "%%")
        return token

    return _TOKENS.sub(swap, sql)


def translate(sql: str) -> str:
    """The statement in psycopg's parameter style (cached)."""
    found = _CACHE.get(sql)
    if found is not None:
        return found
    text = _placeholders(sql)
    if len(_CACHE) < 4096:  # statements with IN (?, ?, ...) lists vary in length
        _CACHE[sql] = text
    return text


def driver_errors() -> tuple[type[BaseException], ...]:
    """The exception classes psycopg raises (none when it is not installed)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)


def translate_error(err: BaseException, where: str) -> BaseException:
    """The nexus_store error a psycopg error means (`driver_errors.translate`).

    A lock timeout is `DatabaseBusy` (retryable; issue 14), an integrity error a
    `ConstraintViolation`, a full disk, damaged data or a driver limit their
    `StorageError` (issue 18), anything else a `StorageError` with the server's first
    line: never a psycopg exception.
    """
    return _translate(err, where)


class PgCursor:
    """The result of one statement, with the sqlite3 cursor methods the store uses."""

    def __init__(self, cursor: psycopg.Cursor[Any] | None, lastrowid: int | None = None) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid

    @property
    def description(self) -> Any:
        """Column descriptions (``name`` first), or None for a statement without rows."""
        return None if self._cursor is None else self._cursor.description

    def fetchone(self) -> Any:
        """The next row, or None."""
        if self._cursor is None or self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        if self._cursor is None or self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        if self._cursor is None or self._cursor.description is None:
            return iter(())
        return iter(self._cursor)


_DEFERRABLE = re.compile(r"^\s*(begin|update)\b", re.IGNORECASE)


class PgConnection:
    """A psycopg connection behind the part of `sqlite3.Connection` the store uses.

    The psycopg connection is in autocommit mode: as with the store's SQLite
    connection, a statement outside `Store.atomic` commits on its own, and
    ``atomic`` issues ``begin``/``commit`` and savepoints itself.

    Round trips cost more than the statements of an append, so inside a transaction
    the statements whose results the store never reads (``begin``, ``update``, the
    session lock) are held back and sent in one pipeline with the next statement:
    an append takes four round trips instead of eight. An error of a held-back
    statement surfaces at that next statement, still inside the same transaction.
    """

    def __init__(self, raw: psycopg.Connection[Any], where: str = "PostgreSQL") -> None:
        self.raw = raw
        self.where = where  # the redacted URL, as driver errors name it
        self._pending: list[tuple[str, Any]] = []

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or its ``begin`` is held back)."""
        from psycopg import pq

        return bool(self._pending) or self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    def defer(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> None:
        """Send a statement whose result is not needed with the next one (in a transaction)."""
        if not self.in_transaction:
            self.execute(sql, params)
            return
        self._pending.append((translate(sql), params))

    def _send(self, text: str, params: Any) -> psycopg.Cursor[Any]:
        if not self._pending:
            return self.raw.execute(text, params)
        pending, self._pending = self._pending, []
        with self.raw.pipeline():
            for held, held_params in pending:
                self.raw.execute(held, held_params)
            cursor = self.raw.execute(text, params)
        return cursor

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> PgCursor:
        """Run one statement (``?``/``:name`` placeholders); errors are psycopg's."""
        from psycopg import pq

        idle = self.raw.info.transaction_status == pq.TransactionStatus.IDLE
        if _DEFERRABLE.match(sql) and (sql.strip() == "begin" or not idle or self._pending):
            self._pending.append((translate(sql), params))
            return PgCursor(None)
        if sql.lstrip().startswith("rollback"):
            # what is held back belongs to the work being undone: never send it
            self._pending.clear()
            if idle:
                return PgCursor(None)
        return PgCursor(self._send(translate(sql), params))

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        """Run one statement for each parameter set (pipelined by psycopg)."""
        text = translate(sql)
        if len(rows) == 1:
            self._send(text, rows[0])
            return
        if self._pending:
            self._send("select 1", ())
        with self.raw.cursor() as cursor:
            cursor.executemany(text, rows)

    def run_script(self, sql: str) -> None:
        """Run a migration file: several statements, no parameters (simple protocol)."""
        if self._pending:
            self._send("select 1", ())
        self.raw.execute(sql.encode())

    def close(self) -> None:
        """Close the connection."""
        self._pending.clear()
        self.raw.close()


def connect(url: str, *, timeout: float = 10.0) -> psycopg.Connection[Any]:
    """Open an autocommit psycopg connection.

    Raises:
        StoreOpenError: If psycopg is missing or the server cannot be reached.
    """
    try:
        import psycopg
    except ImportError:
        raise StoreOpenError(
            "PostgreSQL needs psycopg 3: pip install 'nexus_store[postgres]'"
        ) from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
    except psycopg.Error as err:
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise StoreOpenError(f"cannot connect to {redact(url)}: {reason}") from None


_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*(\w+)", re.DOTALL)
_ALLOWED_FIRST = {"select", "with", "values", "explain", "show", "table"}


def refuse_unless_query(
    sql: str, allowed: set[str], listing: str, statements: frozenset[str] | None = None
) -> str:
    """The statement's first keyword (comments skipped), if it is one of ``allowed``.

    Both ``nexus-store sql`` backends check this before they run anything.

    Args:
        sql: The statement.
        allowed: First keywords of the statements that run.
        listing: What runs, for the message.
        statements: Every first keyword of a statement of the backend, when known: a
            first word outside it is no statement at all and is left to the backend's
            parser, whose syntax error says what is wrong (``selec 1``).

    Raises:
        ReadOnlyError: If it is not; ``listing`` says what runs.
    """
    match = _QUERY_START.match(sql)
    first = match.group(1).lower() if match else ""
    if first and statements is not None and first not in statements:
        return first
    if first not in allowed:
        word = first.upper() or "an empty statement"
        raise ReadOnlyError(
            f"sql is read-only: {word} is refused (only {listing} run); the database was "
            "not changed"
        )
    return first


_FUNCTION_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_$]*)\s*\(")
# pg_* functions that only describe sizes, types and definitions (the others reach the
# server's files, settings, logs or other sessions: pg_read_file, pg_ls_dir, ...).
_PG_HARMLESS = {
    "pg_typeof",
    "pg_column_size",
    "pg_size_pretty",
    "pg_size_bytes",
    "pg_relation_size",
    "pg_total_relation_size",
    "pg_table_size",
    "pg_indexes_size",
    "pg_get_expr",
    "pg_get_indexdef",
    "pg_get_viewdef",
    "pg_get_constraintdef",
    "pg_get_serial_sequence",
    "pg_table_is_visible",
    "pg_encoding_to_char",
}
_PG_REFUSED = {"set_config", "dblink", "current_setting"}


def _refused_function(name: str) -> bool:
    name = name.lower()
    return (
        name in _PG_REFUSED
        or (name.startswith("pg_") and name not in _PG_HARMLESS)
        or name.startswith(("lo_", "dblink"))
        or "_to_xml" in name  # query_to_xml('...') runs the SQL text it is given
    )


def _plan_texts(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _plan_texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _plan_texts(value)


def _refuse_unsafe_functions(raw: Any, sql: str, first: str, params: Any) -> None:
    """Refuse a query that calls a function outside the allowed set (issue 18).

    The names are read from the server's own plan (EXPLAIN VERBOSE deparses every call
    by its real name, whatever quoting, schema or view the text used); EXPLAIN without
    ANALYZE runs nothing. EXPLAIN ANALYZE would run the query, so it is refused.
    """
    if first == "explain":
        if re.search(r"\banaly[sz]e\b", sql, re.IGNORECASE):
            raise ReadOnlyError(
                "sql refuses EXPLAIN ANALYZE on PostgreSQL (it runs the query); use EXPLAIN"
            )
        return
    if first == "show":
        return
    text = "explain (verbose, format json) " + _placeholders(sql)
    plan = raw.execute(text, params).fetchone()[0]
    for piece in _plan_texts(plan):
        for name in _FUNCTION_CALL.findall(piece):
            if _refused_function(name):
                raise ReadOnlyError(
                    f"sql refuses the function {name}() on PostgreSQL: it reaches the "
                    "server's files, settings or other sessions; the database was not changed"
                )


def run_readonly_pg(
    url: str,
    sql: str,
    params: Sequence[Any] | Mapping[str, Any] = (),
    *,
    timeout: float = 30.0,
) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """Run one read-only query on a PostgreSQL store (``nexus-store sql``).

    The statement must start like a query and runs alone (extended protocol) in a
    ``READ ONLY`` transaction that is rolled back, so the server refuses any write;
    functions that read the server's files or settings (``pg_read_file``, ...) are
    refused before it runs, and ``statement_timeout`` stops it after ``timeout``
    seconds. For a hard guarantee, connect as a role granted SELECT only.

    Raises:
        ReadOnlyError: If the statement would write, calls a refused function, or
            returns no rows.
        QueryTimeout: If it runs longer than ``timeout``.
    """
    import psycopg

    first = refuse_unless_query(
        sql, _ALLOWED_FIRST, "SELECT, WITH, VALUES, EXPLAIN, SHOW and TABLE"
    )
    raw = connect(url)
    try:
        raw.autocommit = False
        raw.read_only = True
        raw.execute(
            "select set_config('statement_timeout', %s, true)", [f"{int(timeout * 1000)}ms"]
        )
        _refuse_unsafe_functions(raw, sql, first, params)
        cursor = raw.execute(_placeholders(sql), params)
    except ReadOnlyError:
        raw.close()
        raise
    except psycopg.errors.QueryCanceled:
        raw.close()
        raise QueryTimeout(
            f"sql stopped the query after {timeout:g}s; nothing was changed: add a LIMIT or "
            "a stop condition, or give --timeout more seconds"
        ) from None
    except psycopg.Error as err:
        raw.close()
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "read-only" in message or "cannot insert multiple commands" in message:
            raise ReadOnlyError(
                f"sql is read-only: {message}; the database was not changed"
            ) from None
        raise ReadOnlyError(f"sql error: {message}") from None
    if cursor.description is None:
        raw.rollback()
        raw.close()
        raise ReadOnlyError("sql is read-only: the statement returns no rows and was refused")
    columns = [d.name for d in cursor.description]

    def rows() -> Iterator[tuple[Any, ...]]:
        try:
            yield from cursor
        finally:
            raw.rollback()
            raw.close()

    return columns, rows()
