"""A leaf's context status, and finding a session by reference, without pydantic.

`status_figures` is what `Store.status` reports (`Reading.status` wraps it in the
`ContextStatus` model): tokens against the window, compactions on the path, the last
compaction and the degradation risk, read from the path values stored on the leaf in
one query (O(1) in the size of the session). `resolve_session_id` is how
`Store.resolve_session` finds a session by id, id prefix or ``latest``.

Both are plain functions of the `Handle` whose results are plain values, so
``nexus-store context status`` calls them on its store's handle and imports neither
pydantic, the reading part nor the compaction package (issue 17: start-up).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from nexus_store.degradation import RiskLimits, assess
from nexus_store.errors import SessionNotFound
from nexus_store.rows import is_storable_text
from nexus_store.store.db import Handle
from nexus_store.store.leaves import check_active_leaf

__all__ = [
    "DEFAULT_LIMITS",
    "StatusFigures",
    "resolve_session_id",
    "session_and_leaf",
    "status_figures",
]

DEFAULT_LIMITS = RiskLimits()
"""The limits of the default `CompactionConfig`."""

_STATUS_SQL = (
    "select t.uid, t.context_tokens, t.compaction_count, c.uid, c.created_utc, "
    "c.tokens_before, c.tokens_after, c.trigger, c.layer, c.messages_compacted "
    "from turns t left join turns c on c.id = t.compaction_id where t.id = ?"
)
# The keys of `StatusFigures.last_compaction`, in the order of _STATUS_SQL's columns 3-9.
_LAST_COMPACTION = (
    "id",
    "timestamp",
    "tokens_before",
    "tokens_after",
    "trigger",
    "layer",
    "messages_compacted",
)


class StatusFigures(NamedTuple):
    """How full a leaf's context is (the fields of `nexus_store.models.ContextStatus`).

    Attributes:
        session_id: The session.
        leaf_id: The leaf (None for a session without turns).
        tokens: Tokens in the context.
        window: The context window it is measured against.
        percent: tokens / window * 100, rounded to two places.
        compactions: Compactions on the path to the leaf.
        last_compaction: The latest compaction on the path (id, timestamp, tokens
            before/after, trigger, layer, messages compacted), or None.
        risk: Degradation risk: low, medium, high or critical.
        recommendation: What to do about it.
        threshold: Token count at which automatic compaction triggers.
    """

    session_id: str
    leaf_id: str | None
    tokens: int
    window: int
    percent: float
    compactions: int
    last_compaction: dict[str, Any] | None
    risk: str
    recommendation: str
    threshold: int

    def as_dict(self) -> dict[str, Any]:
        """The figures by field name, in field order (what ``--json`` prints)."""
        return self._asdict()


def session_and_leaf(db: Handle, session_id: str, leaf_id: str | None) -> tuple[int, int | None]:
    """``(session key, leaf key)``: the given leaf, or the session's active leaf.

    Raises:
        SessionNotFound: If the session does not exist.
        TurnNotFound: If ``leaf_id`` is not a turn of the session.
        DanglingLeaf: If the active leaf is no turn of the session.
    """
    session_key, active = db.session_row(session_id)
    if leaf_id is None:
        if active is not None:  # issue 18: a dangling leaf is an error, not a TypeError
            check_active_leaf(db, session_key, session_id, active)
        return session_key, active
    return session_key, db.turn_key(session_key, session_id, leaf_id)


def status_figures(
    db: Handle,
    session_id: str,
    leaf_id: str | None = None,
    *,
    window: int | None = None,
    limits: RiskLimits = DEFAULT_LIMITS,
) -> StatusFigures:
    """How full a leaf's context is and how often its path was compacted, in O(1).

    Args:
        db: The database handle.
        session_id: The session.
        leaf_id: The leaf; None for the active leaf.
        window: The model's context window in tokens (default: the limits', 200,000).
        limits: Trigger formula and degradation limits (`CompactionConfig.risk_limits`).

    Returns:
        The figures.

    Raises:
        ValueError: If ``window`` is not positive.
        SessionNotFound: If the session does not exist.
        TurnNotFound: If the leaf is not in the session.
    """
    window = limits.context_window if window is None else window
    if window <= 0:
        raise ValueError(f"window must be a positive number of tokens, not {window}")
    _, key = session_and_leaf(db, session_id, leaf_id)
    tokens = compactions = 0
    leaf_uid = None
    last: dict[str, Any] | None = None
    if key is not None:
        row = db.execute(_STATUS_SQL, [key]).fetchone()
        leaf_uid, tokens, compactions = row[0], row[1], row[2]
        if row[3] is not None:
            last = dict(zip(_LAST_COMPACTION, row[3:10], strict=True))
    found = assess(compactions, limits, tokens=tokens, window=window)
    return StatusFigures(
        session_id=session_id,
        leaf_id=leaf_uid,
        tokens=tokens,
        window=window,
        percent=round(tokens / window * 100, 2),
        compactions=compactions,
        last_compaction=last,
        risk=found.risk,
        recommendation=found.recommendation,
        threshold=limits.threshold(window),
    )


def resolve_session_id(db: Handle, ref: str) -> str:
    """The id of the session ``ref`` names: its id, a unique id prefix, or ``latest``.

    ``latest`` is the most recently updated session.

    Raises:
        SessionNotFound: If nothing or more than one session matches.
    """
    if not (isinstance(ref, str) and is_storable_text(ref)):
        raise SessionNotFound(f"no session with id or id prefix {ref!r}")
    if db.execute("select 1 from sessions where uid = ?", [ref]).fetchone() is not None:
        return ref
    if ref == "latest":
        row = db.execute(
            "select uid from sessions order by updated_utc desc, id desc limit 1"
        ).fetchone()
        if row is None:
            raise SessionNotFound("there are no sessions in this database yet")
        return str(row[0])
    pattern = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = db.execute(
        "select uid, title, cwd from sessions where uid like ? escape '\\' order by uid limit 11",
        [pattern],
    ).fetchall()
    if len(rows) == 1:
        return str(rows[0][0])
    if not rows:
        raise SessionNotFound(f"no session with id or id prefix {ref!r}")
    # Sub-agent sessions share their parent's id prefix (issue 15): name them.
    shown = [uid + (f" ({title or cwd})" if title or cwd else "") for uid, title, cwd in rows[:10]]
    more = ", ..." if len(rows) > 10 else ""
    raise SessionNotFound(
        f"{ref!r} is the prefix of several sessions: {', '.join(shown)}{more}; give more of the id"
    )
