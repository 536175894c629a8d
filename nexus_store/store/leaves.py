"""The active leaf must be a turn of its session (issue 18, item 6).

`sessions.active_leaf_id` has no foreign key that follows the session (and a file
repaired by hand, or written by an older version, can point it anywhere). A read of
the active leaf that found no turn used to fail with a raw TypeError, and an append
silently started a new root, dropping the history from the context. Both now stop
with `DanglingLeaf`, which names the repair: ``nexus-store doctor --fix`` (its
``active_leaf`` check moves the leaf to the session's last turn).

`ACTIVE_LEAF`, the parent marker of appends, lives here too: the facade names it in
its signatures, and importing it must not import the append part (issue 17: start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus_store.errors import DanglingLeaf

if TYPE_CHECKING:
    from nexus_store.store.db import Handle

__all__ = ["ACTIVE_LEAF", "check_active_leaf", "dangling"]


class _ActiveLeaf:
    def __repr__(self) -> str:
        return "ACTIVE_LEAF"


ACTIVE_LEAF: Any = _ActiveLeaf()
"""Parent marker: append as a child of the session's active leaf (the default)."""


def dangling(session_id: str, leaf_key: int) -> DanglingLeaf:
    """The error for a session whose active leaf (key ``leaf_key``) is no turn of it."""
    return DanglingLeaf(
        f"session {session_id!r}: its active leaf points at turn key {leaf_key}, which is not "
        "a turn of this session (the database was changed outside nexus_store or damaged); "
        "run `nexus-store doctor --fix` to move the leaf to the session's last turn, or "
        "give a leaf id; nothing was changed"
    )


def check_active_leaf(db: Handle, session_key: int, session_id: str, leaf_key: int) -> None:
    """Raise `DanglingLeaf` unless ``leaf_key`` is a turn of the session.

    Raises:
        DanglingLeaf: If it is not.
    """
    row = db.execute(
        "select 1 from turns where id = ? and session_id = ?", [leaf_key, session_key]
    ).fetchone()
    if row is None:
        raise dangling(session_id, leaf_key)
