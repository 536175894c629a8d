"""nexus_store: LLM agent sessions as a tree of turns in SQLite.

Sessions branch, compaction turns summarize old history without deleting it, the
context of any leaf is assembled by one SQL query with pi's exact semantics, and
JSONL transcripts migrate in and export back losslessly.
"""

from __future__ import annotations

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
from nexus_store.models import Context, ContextStatus, Session, Turn
from nexus_store.store import ACTIVE_LEAF, Store
from nexus_store.store.search import SearchHit
from nexus_store.tokens import CharsEstimator, Cl100kCounter, TokenCounter
from nexus_store.workspace import WorkspaceFile

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
