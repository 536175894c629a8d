"""What a database holds: its tables, views and their columns (``nexus-store schema``).

Read through the same read-only door as ``nexus-store sql`` (`run_readonly`), so
describing a database never writes to it. On SQLite the columns come from
``pragma_table_xinfo``; the shadow tables FTS5 keeps for each index are left out
(they are FTS5's storage, not something to query). On PostgreSQL they come from
``information_schema`` for the connection's current schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from nexus_store.store.pg import is_postgres_url
from nexus_store.store.readonly import run_readonly

__all__ = ["Column", "Relation", "describe_schema"]

# Every table and view with its columns, in creation order, then column order.
SQLITE_SCHEMA_SQL = """
select m.name, case when m.sql like 'create virtual table%' then 'virtual table' else m.type end,
       c.name, c.type, c."notnull", c.pk, c.dflt_value
from sqlite_master m
join pragma_table_xinfo(m.name) c
where m.type in ('table', 'view') and m.name not like 'sqlite_%'
order by m.rowid, c.cid
"""

# The same from information_schema (PostgreSQL), for the connection's current schema.
PG_SCHEMA_SQL = """
select c.table_name,
       case t.table_type when 'BASE TABLE' then 'table' when 'VIEW' then 'view'
            else lower(t.table_type) end,
       c.column_name, c.data_type, c.is_nullable = 'NO',
       coalesce((select 1 from information_schema.key_column_usage k
                 join information_schema.table_constraints tc
                   on tc.constraint_name = k.constraint_name
                  and tc.table_schema = k.table_schema
                 where tc.constraint_type = 'PRIMARY KEY' and k.table_schema = c.table_schema
                   and k.table_name = c.table_name and k.column_name = c.column_name
                 limit 1), 0),
       c.column_default
from information_schema.columns c
join information_schema.tables t
  on t.table_schema = c.table_schema and t.table_name = c.table_name
where c.table_schema = current_schema()
order by c.table_name, c.ordinal_position
"""

_FTS5_SHADOWS = ("_data", "_idx", "_content", "_docsize", "_config")


class Column(BaseModel):
    """One column of a table or view.

    Attributes:
        name: The column name.
        type: Its declared type ("" when none is declared).
        not_null: Whether it is declared NOT NULL.
        primary_key: Whether it is (part of) the primary key.
        default: Its default expression, or None.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    type: str
    not_null: bool
    primary_key: bool
    default: str | None


class Relation(BaseModel):
    """A table, virtual table or view, with its columns.

    Attributes:
        name: Its name.
        type: ``table``, ``virtual table`` or ``view``.
        columns: Its columns, in order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    type: str
    columns: list[Column]


def describe_schema(target: str | Path) -> list[Relation]:
    """The tables, virtual tables and views of a database, with their columns.

    Args:
        target: A database file, or a ``postgresql://`` URL.

    Returns:
        Each relation in creation order (SQLite) or by name (PostgreSQL).

    Raises:
        StoreOpenError: If the file is missing or not a SQLite database.
    """
    postgres = is_postgres_url(target)
    _, rows = run_readonly(target, PG_SCHEMA_SQL if postgres else SQLITE_SCHEMA_SQL)
    found: dict[str, tuple[str, list[Column]]] = {}
    for row in rows:
        name, kind, column = str(row[0]), str(row[1]), _column(row)
        found.setdefault(name, (kind, []))[1].append(column)
    virtual = [name for name, (kind, _) in found.items() if kind == "virtual table"]
    shadows = {name + suffix for name in virtual for suffix in _FTS5_SHADOWS}
    return [
        Relation(name=name, type=kind, columns=columns)
        for name, (kind, columns) in found.items()
        if name not in shadows
    ]


def _column(row: tuple[Any, ...]) -> Column:
    return Column(
        name=str(row[2]),
        type=str(row[3] or ""),
        not_null=bool(row[4]),
        primary_key=bool(row[5]),
        default=None if row[6] is None else str(row[6]),
    )
