"""`PostgresStore` (kept importable here): a `Store` over the PostgreSQL dialect.

The backend is a strategy, `nexus_store.store.dialect.PostgresDialect`; the class
itself lives with `Store` in `nexus_store.store.facade`.
"""

from __future__ import annotations

from nexus_store.store.dialect import pg_schema_files
from nexus_store.store.facade import PostgresStore

__all__ = ["PostgresStore", "pg_schema_files"]
