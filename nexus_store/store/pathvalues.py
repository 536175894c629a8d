"""The one rule for a turn's path values (issue 14).

Turns are immutable, so what depends only on the path from the root is computed
once, when a turn is written, and stored on it: its depth, the tokens along the
path, the tokens of its context, its nearest compaction and how many compactions
the path holds, the model and thinking level in effect, and its *run* (the first
seq of the chain of consecutive seqs it ends, and that chain's parent; see
`nexus_store.store.sql`). `path_values` is that rule. Native appends, imports and
copies call it to write a turn; ``doctor`` calls it again on the stored rows and
compares, so a check can never disagree with the write it checks.

The inputs are the parent's row (`PathRow`) and, for the root of a forked session,
the fork turn of the parent session: the root stays a root of its own session
(its ``parent_id`` is NULL) but continues the parent session's path, so its path
values are taken from the fork turn as if it were the parent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from nexus_store.rows import dumps

__all__ = ["PARENT_COLUMNS", "PathRow", "PathValues", "child_row", "path_values"]

# The columns of a `PathRow`, in its field order (``t`` is the turn, ``pc`` its
# nearest compaction, joined by the caller).
PARENT_COLUMNS = (
    "t.id, t.seq, t.depth, t.tokens, t.path_tokens, t.context_tokens, t.compaction_id, "
    "t.compaction_count, t.active_model_json, t.active_thinking_level, t.run_start_seq, "
    "t.run_parent_id, t.kind, t.uid, pc.uid"
)


class PathRow(NamedTuple):
    """A stored turn as the parent (or fork point, or first kept turn) of a new one."""

    id: int
    seq: int
    depth: int
    tokens: int
    path_tokens: int
    context_tokens: int
    compaction_id: int | None
    compaction_count: int
    active_model_json: str | None
    active_thinking_level: str | None
    run_start_seq: int
    run_parent_id: int | None
    kind: str
    uid: str
    compaction_uid: str | None


class PathValues(NamedTuple):
    """The path values of a new turn (the columns of the same names)."""

    depth: int
    path_tokens: int
    context_tokens: int
    compaction_id: int | None
    compaction_count: int
    run_start_seq: int
    run_parent_id: int | None
    active_model_json: str | None
    active_thinking_level: str | None


# The fields doctor compares: derived from the tree alone (the model and thinking
# level also depend on message payloads, which doctor does not re-read).
STRUCTURAL = (
    "depth",
    "path_tokens",
    "context_tokens",
    "compaction_id",
    "compaction_count",
    "run_start_seq",
    "run_parent_id",
)


def path_values(
    parent: PathRow | None,
    *,
    key: int | None,
    seq: int,
    kind: str,
    tokens: int,
    fork: PathRow | None = None,
    kept: PathRow | None = None,
    entry: Mapping[str, Any] | None = None,
    messages: Sequence[Mapping[str, Any]] = (),
) -> PathValues:
    """The path values of a new turn.

    Args:
        parent: The row of the turn's parent (its ``parent_id``), None for a root.
        key: The new turn's key (needed for a compaction, its own nearest compaction).
        seq: The new turn's seq in its session.
        kind: The new turn's kind.
        tokens: The new turn's own tokens (its messages, or its summary).
        fork: For a root of a forked session, the fork turn it continues from.
        kept: For a compaction, its first kept turn when that is an ancestor
            (None: it keeps nothing before it).
        entry: The entry, for the model and thinking level it sets (None: inherited).
        messages: The turn's messages (an assistant message sets the model).

    Returns:
        The values to store.

    Example:
        >>> root = path_values(None, key=1, seq=0, kind="message", tokens=5)
        >>> root.depth, root.path_tokens, root.run_start_seq, root.active_thinking_level
        (0, 5, 0, 'off')
    """
    base = parent if parent is not None else fork  # where the path values continue from
    depth = 0 if base is None else base.depth + 1
    if parent is not None and parent.seq == seq - 1:
        run_start, run_parent = parent.run_start_seq, parent.run_parent_id
    else:
        run_start, run_parent = seq, None if base is None else base.id
    model_json = None if base is None else base.active_model_json
    thinking = "off" if base is None else base.active_thinking_level
    if entry is not None:
        model_json, thinking = _settings(model_json, thinking, kind, entry, messages)
    path_tokens = 0 if base is None else base.path_tokens
    if kind == "compaction":
        if kept is not None and base is not None:
            own = 0 if kept.kind == "compaction" else kept.tokens
            context_tokens = tokens + base.path_tokens - kept.path_tokens + own
        else:
            context_tokens = tokens
        compaction_id, count = key, 1 + (0 if base is None else base.compaction_count)
    else:
        path_tokens += tokens
        context_tokens = tokens + (0 if base is None else base.context_tokens)
        compaction_id = None if base is None else base.compaction_id
        count = 0 if base is None else base.compaction_count
    # (positional: an append is the hot path, and keywords cost a third more here)
    return PathValues(
        depth,
        path_tokens,
        context_tokens,
        compaction_id,
        count,
        run_start,
        run_parent,
        model_json,
        thinking,
    )


def child_row(
    values: PathValues,
    *,
    key: int,
    seq: int,
    kind: str,
    tokens: int,
    uid: str,
    parent: PathRow | None,
    fork: PathRow | None = None,
) -> PathRow:
    """The new turn as a `PathRow`, for the turns written under it."""
    base = parent if parent is not None else fork
    compaction_uid = (
        uid if kind == "compaction" else (None if base is None else base.compaction_uid)
    )
    (
        depth,
        path_tokens,
        context_tokens,
        compaction_id,
        count,
        run_start,
        run_parent,
        model,
        level,
    ) = values
    return PathRow(
        key,
        seq,
        depth,
        tokens,
        path_tokens,
        context_tokens,
        compaction_id,
        count,
        model,
        level,
        run_start,
        run_parent,
        kind,
        uid,
        compaction_uid,
    )


def _settings(
    model_json: str | None,
    thinking: str | None,
    kind: str,
    entry: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str | None, str | None]:
    """The model and thinking level after a turn (a key absent from the entry stays absent)."""
    if kind == "model_change":
        model_json = dumps(
            {
                k: entry[v]
                for k, v in (("provider", "provider"), ("modelId", "modelId"))
                if v in entry
            }
        )
    elif kind == "thinking_level_change":
        level = entry.get("thinkingLevel")
        thinking = level if isinstance(level, str) else None
    for message in messages:
        if message.get("role") == "assistant":
            model_json = dumps(
                {
                    k: message[v]
                    for k, v in (("provider", "provider"), ("modelId", "model"))
                    if v in message
                }
            )
    return model_json, thinking
