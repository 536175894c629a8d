"""The store: every SQL statement of nexus_store lives in this package.

`Store` (in `nexus_store.store.facade`) is the one door; docs/architecture.md maps
the parts behind it.
"""

from __future__ import annotations

from nexus_store.store.facade import ACTIVE_LEAF, PostgresStore, Store

__all__ = ["ACTIVE_LEAF", "PostgresStore", "Store"]
