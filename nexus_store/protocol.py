"""The public contract of a session store, as a Protocol.

`nexus_store.Store` satisfies it structurally; third parties (another backend, a
test double) implement it the same way. The conformance tests are parametrized
over every implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from nexus_store.models import Context, ContextStatus, Session, Turn

__all__ = ["SessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """What every nexus_store backend offers."""

    def create_session(self, *, id: str | None = None, cwd: str | None = None) -> Session:
        """Create an empty session."""
        ...

    def get_session(self, session_id: str) -> Session:
        """Return a session or raise SessionNotFound."""
        ...

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """Sessions, most recently updated first."""
        ...

    def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> Turn:
        """Append a pi v3 entry as a new turn."""
        ...

    def append_message(self, session_id: str, message: Mapping[str, Any]) -> Turn:
        """Append one agent message to the active leaf."""
        ...

    def navigate(self, session_id: str, turn_id: str | None) -> Session:
        """Move the active leaf."""
        ...

    def get_turn(self, session_id: str, turn_id: str) -> Turn:
        """Return a turn or raise TurnNotFound."""
        ...

    def children(self, session_id: str, turn_id: str | None) -> list[Turn]:
        """Children of a turn (roots for None)."""
        ...

    def leaves(self, session_id: str) -> list[Turn]:
        """Turns without children."""
        ...

    def path(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """Turns from the root to a leaf."""
        ...

    def context(self, session_id: str, leaf_id: str | None = None) -> Context:
        """The context of a leaf, with pi's semantics."""
        ...

    def status(
        self, session_id: str, leaf_id: str | None = None, *, window: int | None = None
    ) -> ContextStatus:
        """How full a leaf's context is."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...
