"""nexus_store: LLM agent sessions as a tree of turns in SQLite.

Sessions branch, compaction turns summarize old history without deleting it, the
context of any leaf is assembled by one SQL query with pi's exact semantics, and
JSONL transcripts migrate in and export back losslessly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus_store.errors import (
    ConflictError,
    ConstraintViolation,
    CounterMismatch,
    DanglingLeaf,
    DatabaseBusy,
    DatabaseCorrupt,
    DatabaseLocked,
    DiskFull,
    DriverLimitExceeded,
    InvalidArgument,
    InvalidEntry,
    InvalidQuery,
    NexusError,
    QueryTimeout,
    ReadOnlyError,
    SchemaOutOfDate,
    SessionNotFound,
    StorageError,
    StoreOpenError,
    SummarizerError,
    TranscriptError,
    TurnNotFound,
)

if TYPE_CHECKING:
    from nexus_store.models import Context, ContextStatus, Session, Turn
    from nexus_store.store import ACTIVE_LEAF, Store
    from nexus_store.store.search import SearchHit
    from nexus_store.tokens import CharsEstimator, Cl100kCounter, TokenCounter
    from nexus_store.workspace import WorkspaceFile

# Imported on first use (PEP 562), so that a command or a submodule import does not
# pay for the whole store (pydantic models, every part of the store): `nexus-store
# context status` starts in a fraction of the time.
_LAZY = {
    "Context": "nexus_store.models",
    "ContextStatus": "nexus_store.models",
    "Session": "nexus_store.models",
    "Turn": "nexus_store.models",
    "ACTIVE_LEAF": "nexus_store.store",
    "Store": "nexus_store.store",
    "SearchHit": "nexus_store.store.search",
    "CharsEstimator": "nexus_store.tokens",
    "Cl100kCounter": "nexus_store.tokens",
    "TokenCounter": "nexus_store.tokens",
    "WorkspaceFile": "nexus_store.workspace",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nexus_store' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ACTIVE_LEAF",
    "CharsEstimator",
    "Cl100kCounter",
    "ConflictError",
    "ConstraintViolation",
    "Context",
    "ContextStatus",
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
    "SearchHit",
    "Session",
    "SessionNotFound",
    "StorageError",
    "Store",
    "StoreOpenError",
    "SummarizerError",
    "TokenCounter",
    "TranscriptError",
    "Turn",
    "TurnNotFound",
    "WorkspaceFile",
]
__version__ = "0.1.0"
