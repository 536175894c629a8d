"""Opening a database: the backend's dialect, its checks and migrations, the counter.

`open_handle` is what `Store()` calls: it picks the dialect from the target (a
``postgresql://`` URL or a SQLite file, `sqlite_utils.Database` or memory), refuses
what is not a nexus_store database before writing to it, configures and migrates
the database, and settles the token counter it records.
"""

from __future__ import annotations

import contextlib
from typing import Any

from nexus_store.errors import CounterMismatch
from nexus_store.store import connection
from nexus_store.store.db import Handle
from nexus_store.store.dialect import PostgresDialect, SqliteDialect
from nexus_store.store.urls import is_postgres_url, redact
from nexus_store.tokens import DEFAULT_COUNTER, TokenCounter, get_counter

__all__ = ["open_handle"]


def open_handle(
    path: Any,
    *,
    memory: bool = False,
    counter: str | TokenCounter | None = None,
    synchronous: str = "NORMAL",
    busy_timeout: float = 5.0,
) -> Handle:
    """Open, check, configure and migrate a database, and settle its token counter.

    The arguments and their defaults are `Store`'s (the CLI's ``context status`` opens
    a handle without the facade).

    Raises:
        StoreOpenError: If the target cannot be opened as a nexus_store database.
        SchemaOutOfDate: If it was written by a newer nexus_store.
        CounterMismatch: If ``counter`` is not the one the database records.
        ValueError: For ``memory=True`` with a URL, or an unknown synchronous mode.
    """
    mode = synchronous.upper()
    if is_postgres_url(path):
        if memory:
            raise ValueError("memory=True is for SQLite; give a postgresql:// URL or a file path")
        url = str(path)
        postgres = PostgresDialect(url)
        postgres.check_synchronous(mode, synchronous)
        handle = Handle(
            postgres.connect(url, busy_timeout=busy_timeout), postgres, where=redact(url)
        )
        try:
            postgres.configure(handle, mode, busy_timeout)
            postgres.check_ours(handle)
            postgres.migrate(handle)
            handle.counter = resolve_counter(handle, counter)
        except BaseException:
            handle.close()
            raise
        return handle
    sqlite = SqliteDialect()
    sqlite.check_synchronous(mode, synchronous)
    conn, database, filename, created, read_only = sqlite.connect(
        path, memory=memory, busy_timeout=busy_timeout
    )
    where = str(filename) if filename is not None else ":memory:"
    handle = Handle(
        conn,
        sqlite,
        where=where,
        filename=filename,
        sqlite_db=database,
        read_only=read_only,
    )
    try:
        sqlite.check_ours(handle)  # before any pragma: refuse a foreign file untouched
        if filename is not None and not created:
            connection.warn_if_shared(filename)
        sqlite.configure(handle, mode, busy_timeout)
        sqlite.migrate(handle)
        handle.counter = resolve_counter(handle, counter)
    except BaseException:
        handle.close()
        if created and filename is not None:
            with contextlib.suppress(OSError):
                filename.unlink()
        raise
    return handle


def resolve_counter(handle: Handle, counter: str | TokenCounter | None) -> TokenCounter:
    """The counter to use: the one asked for, which must be the one the database records."""
    row = handle.execute("select value from settings where key = 'token_counter'").fetchone()
    recorded = row[0] if row else None
    chosen: TokenCounter
    if counter is None:
        chosen = get_counter(recorded or DEFAULT_COUNTER)
    elif isinstance(counter, str):
        chosen = get_counter(counter)
    else:
        chosen = counter
    if recorded is None:
        if handle.read_only:  # a read-only file records nothing; it is read with chosen
            return chosen
        with handle.atomic():
            handle.execute(handle.dialect.statements.insert_setting, ["token_counter", chosen.name])
    elif recorded != chosen.name:
        raise CounterMismatch(
            f"this database stores token counts made by {recorded!r}, not {chosen.name!r}; "
            f"open it with its own counter (counter={recorded!r}, or no --counter option) "
            "so that counts stay comparable",
            where=handle.where,
            recorded=recorded,
            requested=chosen.name,
        )
    return chosen
