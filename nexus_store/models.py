"""Values returned by the store: sessions, turns, contexts and their status.

The model: a **session** is one conversation tree; a **turn** is one immutable node
of it (a pi v3 entry: a message, a compaction, a branch summary, a model change,
...); the **active leaf** is the session's movable pointer, where the next append
goes. A **context** is what the model sees for one leaf, assembled with pi's
semantics. These are pure values: frozen, with no connection and no lazy loading;
identity (ids, parents, timestamps) is assigned by the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Context", "ContextStatus", "Session", "Turn"]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Session(BaseModel):
    """One conversation tree.

    Attributes:
        id: Public session id.
        cwd: Working directory the session was started in.
        title: Display name (pi's session_info name), if any.
        created_utc: Creation time, ISO 8601 UTC.
        updated_utc: Time of the last append or navigation.
        active_leaf: Id of the persisted active leaf; None before the first turn.
        parent_session: Id of the session this one was forked from.
        fork_turn: Id of the parent session's turn the fork starts at.
        source_format: Transcript format it was imported from (None if native).
        source_path: File it was imported from.
        source_id: The transcript's own session id.
        flush_epoch: Compaction epoch of the last memory flush (None: never flushed).
        turn_count: Number of turns.
    """

    model_config = _FROZEN

    id: str
    cwd: str | None = None
    title: str | None = None
    created_utc: str
    updated_utc: str
    active_leaf: str | None = None
    parent_session: str | None = None
    fork_turn: str | None = None
    source_format: str | None = None
    source_path: str | None = None
    source_id: str | None = None
    flush_epoch: int | None = None
    turn_count: int = 0


class Turn(BaseModel):
    """One node of a session tree, with the path values stored on it.

    Attributes:
        id: Public turn id, unique within its session.
        session_id: Id of its session.
        parent_id: Id of the parent turn; None for a root.
        kind: Entry type (message, compaction, branch_summary, ...; unknown types kept).
        seq: Append order within the session.
        timestamp: The entry's ISO 8601 time, if it has one.
        depth: Number of ancestors.
        tokens: Tokens this turn adds to a context.
        path_tokens: Sum of tokens from the root to here (compactions excluded).
        context_tokens: Tokens of the context assembled with this turn as leaf.
        compactions: Number of compactions on the path (self included).
        compaction_id: Nearest compaction on the path (self included).
        model: Model in effect here, ``{"provider", "modelId"}``, or None.
        thinking_level: Thinking level in effect here.
        entry: The pi v3 entry, exactly as written (``message`` included).
    """

    model_config = _FROZEN

    id: str
    session_id: str
    parent_id: str | None
    kind: str
    seq: int
    timestamp: str | None = None
    depth: int
    tokens: int
    path_tokens: int
    context_tokens: int
    compactions: int
    compaction_id: str | None = None
    model: dict[str, Any] | None = None
    thinking_level: str | None = None
    entry: dict[str, Any]


_TURN_FIELDS = tuple(Turn.model_fields)
_setattr = object.__setattr__


def stored_turn(**values: Any) -> Turn:
    """A `Turn` from values the store built (every field, already of its type).

    What ``Turn.model_construct(**values)`` gives (no validation, every field set),
    without its per-field walk over aliases and defaults (given in the fields' order;
    otherwise it is ``model_construct``): 4.8 instead of 10.8 us per turn, for the
    turn an append returns and for each turn of a path read (issue 17).
    tests/test_rows.py checks it against ``model_construct``.
    """
    if tuple(values) != _TURN_FIELDS:  # (a field missing or out of order: the long way)
        return Turn.model_construct(**values)
    turn = Turn.__new__(Turn)
    _setattr(turn, "__dict__", values)
    _setattr(turn, "__pydantic_fields_set__", set(_TURN_FIELDS))
    _setattr(turn, "__pydantic_extra__", None)
    _setattr(turn, "__pydantic_private__", None)
    return turn


class Context(BaseModel):
    """The context of one leaf: what the model is given, in pi's exact form.

    Attributes:
        session_id: The session.
        leaf_id: The leaf it was assembled for (None: before the first turn).
        messages: pi AgentMessage dicts, as pi's buildSessionContext returns them.
        model: ``{"provider", "modelId"}`` from the path, or None.
        thinking_level: Thinking level from the path ("off" by default).
        tokens: Stored token count of these messages.
        turn_ids: For each message, the id of the turn that produced it.
        turn_kinds: For each message, the kind of that turn.
        message_tokens: For each message, its stored token count.
    """

    model_config = _FROZEN

    session_id: str
    leaf_id: str | None
    messages: list[dict[str, Any]]
    model: dict[str, Any] | None
    thinking_level: str | None
    tokens: int
    turn_ids: list[str]
    turn_kinds: list[str] = []
    message_tokens: list[int] = []

    def to_json_dict(self) -> dict[str, Any]:
        """Return the JSON form printed by ``context show --json``."""
        return {
            "messages": self.messages,
            "model": self.model,
            "thinking_level": self.thinking_level,
            "tokens": self.tokens,
        }

    def render(
        self,
        provider: Literal["openai", "anthropic"],
        *,
        thinking: Literal["drop", "keep"] = "drop",
    ) -> list[dict[str, Any]]:
        """Render the messages for a provider API.

        Args:
            provider: ``"openai"`` (OpenAI-compatible chat messages) or ``"anthropic"``.
            thinking: Drop thinking blocks (default) or keep them.

        Returns:
            The provider's message list.
        """
        from nexus_store.render import render_messages

        return render_messages(self.messages, provider, thinking=thinking)


class ContextStatus(BaseModel):
    """How full the context of a leaf is and how often it was compacted.

    Attributes:
        session_id: The session.
        leaf_id: The leaf.
        tokens: Tokens in the context.
        window: The context window it is measured against.
        percent: tokens / window * 100.
        compactions: Compactions on the path to the leaf.
        last_compaction: The latest compaction on the path (id, timestamp, tokens
            before/after, trigger, layer), or None.
        risk: Degradation risk: low, medium, high or critical.
        recommendation: What to do about it.
        threshold: Token count at which automatic compaction triggers.
    """

    model_config = _FROZEN

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
