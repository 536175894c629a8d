"""The store: every SQL statement of nexus_store lives in this package.

`Store` (in `nexus_store.store.facade`) is the one door; docs/architecture.md maps
the parts behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nexus_store.store.facade import ACTIVE_LEAF, PostgresStore, Store

__all__ = ["ACTIVE_LEAF", "PostgresStore", "Store"]


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562): a submodule (`store.pg`, `store.driver_errors`)
    # loads without the facade and what it needs (issue 17: start-up).
    if name not in __all__:
        raise AttributeError(f"module 'nexus_store.store' has no attribute {name!r}")
    from nexus_store.store import facade

    value = getattr(facade, name)
    globals()[name] = value
    return value
