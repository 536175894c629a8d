"""The store: every SQL statement of nexus_store lives in this package."""

from __future__ import annotations

from nexus_store.store.core import ACTIVE_LEAF, Store

__all__ = ["ACTIVE_LEAF", "Store"]
