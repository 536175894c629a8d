"""Sessions: creating, naming, navigating and removing an empty one (part `Sessions`)."""

from __future__ import annotations

import uuid

from nexus_store.errors import ConstraintViolation, InvalidEntry
from nexus_store.models import Session
from nexus_store.store.db import Handle, unstorable, utc_now
from nexus_store.store.reading import Reading

__all__ = ["Sessions"]


class Sessions:
    """The session rows (``Store.create_session``, ``set_title``, ``navigate``, ...).

    Args:
        db: The database handle.
        reading: The reading part (each method returns the session as read back).
    """

    def __init__(self, db: Handle, reading: Reading) -> None:
        self.db = db
        self.reading = reading

    def create_session(
        self,
        *,
        id: str | None = None,
        cwd: str | None = None,
        title: str | None = None,
        parent_session: str | None = None,
        fork_turn: str | None = None,
        created_utc: str | None = None,
    ) -> Session:
        """Create an empty session.

        Args:
            id: Public id (a new UUID when omitted).
            cwd: Working directory.
            title: Display name.
            parent_session: Id of the session this one forks from.
            fork_turn: Id of the parent session's turn the fork starts at.
            created_utc: Creation time (now when omitted).

        Returns:
            The new session.

        Raises:
            InvalidEntry: If the id is taken.
            SessionNotFound: If the parent session does not exist.
            TurnNotFound: If the fork turn is not in the parent session.
        """
        texts = (("id", id), ("cwd", cwd), ("title", title), ("created_utc", created_utc))
        for name, value in texts:
            if unstorable(value):
                raise InvalidEntry(
                    f"create_session {name} {value!r} holds a lone surrogate or NUL (not text)"
                )
        uid = id if id is not None else str(uuid.uuid4())
        now = created_utc or utc_now()
        with self.db.atomic():
            parent_key = fork_key = None
            if parent_session is not None:
                parent_key = self.db.session_key(parent_session)
                if fork_turn is not None:
                    fork_key = self.db.turn_key(parent_key, parent_session, fork_turn)
            elif fork_turn is not None:
                raise InvalidEntry("fork_turn needs parent_session")
            try:
                self.db.execute(
                    "insert into sessions (uid, cwd, title, created_utc, updated_utc, "
                    "parent_session_id, fork_turn_id) values (?, ?, ?, ?, ?, ?, ?)",
                    [uid, cwd, title, now, now, parent_key, fork_key],
                )
            except ConstraintViolation:
                raise InvalidEntry(f"a session with id {uid!r} already exists") from None
        return self.reading.get_session(uid)

    def delete_session_if_empty(self, session_id: str) -> bool:
        """Remove a session that has no turns (a sub-agent spawn that never started).

        Returns:
            True if it was removed; False if it has turns (then nothing changes).

        Raises:
            SessionNotFound: If the session does not exist.
        """
        with self.db.atomic():
            key = self.db.session_key(session_id)
            if self.db.execute(
                "select 1 from turns where session_id = ? limit 1", [key]
            ).fetchone():
                return False
            if self.db.execute(
                "select 1 from sessions where parent_session_id = ? limit 1", [key]
            ).fetchone():
                return False
            self.db.execute("delete from sessions where id = ?", [key])
        return True

    def set_title(self, session_id: str, title: str | None) -> Session:
        """Set a session's display name (stored on the session, not as a turn)."""
        if unstorable(title):
            raise InvalidEntry(f"title {title!r} holds a lone surrogate or NUL (not text)")
        with self.db.atomic():
            key = self.db.session_key(session_id)
            self.db.execute("update sessions set title = ? where id = ?", [title, key])
        return self.reading.get_session(session_id)

    def navigate(self, session_id: str, turn_id: str | None) -> Session:
        """Move the active leaf to ``turn_id`` (None: before the first turn).

        The next append without an explicit parent continues from there; nothing is
        deleted.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If the turn is not in the session.
        """
        with self.db.atomic():
            session_key, _ = self.db.session_row(session_id)
            key = None if turn_id is None else self.db.turn_key(session_key, session_id, turn_id)
            self.db.execute(
                "update sessions set active_leaf_id = ?, updated_utc = ? where id = ?",
                [key, utc_now(), session_key],
            )
        return self.reading.get_session(session_id)

    # -- memory flush (seed 003: once per compaction epoch) ---------------------------

    def set_flush_epoch(self, session_id: str, epoch: int | None) -> None:
        """Store the compaction epoch in which the memory flush last ran (None: never).

        Args:
            session_id: The session.
            epoch: The epoch (`nexus_store.compaction.policy.record_flush` computes it).

        Raises:
            SessionNotFound: When the session does not exist.
        """
        with self.db.atomic():
            key = self.db.session_key(session_id)
            self.db.execute("update sessions set flush_epoch = ? where id = ?", [epoch, key])
