"""What each backend can do, declared (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the common API; ask before calling.

    Attributes:
        gc: `Store.gc` removes rows and reclaims space.
        fts_bm25: Search ranks by BM25 (SQLite FTS5); otherwise by ts_rank.
        file_checks: doctor checks the database file itself (integrity, foreign
            keys, WAL size, permissions).
    """

    gc: bool
    fts_bm25: bool
    file_checks: bool


SQLITE = Capabilities(gc=True, fts_bm25=True, file_checks=True)
POSTGRES = Capabilities(gc=False, fts_bm25=False, file_checks=False)
