"""A context-engine host's sessions and turn commits (schema 0010 and 0011).

OpenClaw names a conversation by its ``sessionKey`` and builds a new engine for each
logical turn, so the key -> session mapping lives here, not in a process. It commits
each accepted turn once, keyed by an *advancement key*, and retries the same key
from its outbox after a crash: `EngineSessions.commit_turn` writes the turn and the
key in one transaction, and a second commit with a known key writes nothing.

`EngineSessions` is a part: it takes the `Store` and uses only its connection,
``atomic()`` and public methods, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from nexus_store.errors import InvalidEntry, SessionNotFound
from nexus_store.rows import is_storable_text
from nexus_store.store.db import utc_now

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["CommitOutcome", "EngineSession", "EngineSessions"]

# A host key's mapping row with its session's public id.
ENGINE_SESSION_SQL = """
select e.session_key, s.uid, e.host_session_id, e.parent_key, e.context_mode, e.ended_reason,
    e.source_path, e.source_seq
from engine_sessions e
join sessions s on s.id = e.session_id
where e.host = ? and e.session_key = ?
"""

# Every mapping of a host, newest first.
ENGINE_SESSIONS_SQL = """
select e.session_key, s.uid, e.host_session_id, e.parent_key, e.context_mode, e.ended_reason,
    e.source_path, e.source_seq
from engine_sessions e
join sessions s on s.id = e.session_id
where e.host = ?
order by e.updated_utc desc, e.id desc
"""

# Whether a session has turns, and where it forks from: without counting its turns
# (get_session's count is O(history); assemble runs on every model call).
SESSION_SHAPE_SQL = """
select s.last_seq >= 0, parent.uid, fork.uid
from sessions s
left join sessions parent on parent.id = s.parent_session_id
left join turns fork on fork.id = s.fork_turn_id
where s.uid = ?
"""

# What an advancement key already committed (the turn's public id, if any).
COMMIT_BY_KEY_SQL = """
select s.uid, t.uid
from turn_commits c
join sessions s on s.id = c.session_id
left join turns t on t.id = c.turn_id
where c.advancement_key = ?
"""

# How far a session has taken its host's own transcript: only ever forward (a commit
# and a reconciliation may both move it).
SOURCE_SQL = """
update engine_sessions set source_path = coalesce(?, source_path), source_seq = ?, updated_utc = ?
where host = ? and session_key = ? and (source_seq is null or source_seq < ?)
"""

# The two columns of a mapping that change after it is made.
UPDATE_SQL = {
    "host_session_id": "update engine_sessions set host_session_id = ?, updated_utc = ? "
    "where host = ? and session_key = ?",
    "ended_reason": "update engine_sessions set ended_reason = ?, updated_utc = ? "
    "where host = ? and session_key = ?",
}


@dataclass(frozen=True)
class EngineSession:
    """One host session key and the nexus_store session it writes.

    Attributes:
        session_key: The host's key (OpenClaw's ``sessionKey``).
        session_id: The nexus_store session.
        host_session_id: The host's session id last seen for the key.
        parent_key: A sub-agent's parent key.
        context_mode: A sub-agent's context mode (``fork`` or ``isolated``).
        ended_reason: Why a sub-agent ended, once it has.
        source_path: The host's own store its history was read from (OpenClaw's
            ``openclaw-agent.sqlite``), once read.
        source_seq: The last ``seq`` of ``host_session_id`` in that store that this
            session holds (committed, imported or reconciled); None: none yet.
    """

    session_key: str
    session_id: str
    host_session_id: str | None = None
    parent_key: str | None = None
    context_mode: str | None = None
    ended_reason: str | None = None
    source_path: str | None = None
    source_seq: int | None = None


@dataclass(frozen=True)
class CommitOutcome:
    """What `EngineSessions.commit_turn` did.

    Attributes:
        status: ``committed`` (written now) or ``duplicate`` (the key was committed before;
            nothing written).
        session_id: The session the key's turn belongs to.
        turn_id: The turn written for the key (None when it carried no message).
    """

    status: Literal["committed", "duplicate"]
    session_id: str
    turn_id: str | None


class EngineSessions:
    """Host session keys and idempotent turn commits over a `Store`.

    Example:
        >>> from nexus_store import Store
        >>> store = Store(memory=True, counter="chars4")
        >>> parts = EngineSessions(store)
        >>> s = parts.ensure("openclaw", "agent:main:main", "sid-1")
        >>> msg = {"role": "user", "content": "hi", "timestamp": 0}
        >>> parts.commit_turn("openclaw", "k1", s.session_id, [msg]).status
        'committed'
        >>> parts.commit_turn("openclaw", "k1", s.session_id, [msg]).status
        'duplicate'

    Args:
        store: The store whose database holds the mapping.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- session keys -------------------------------------------------------------------

    def find(self, host: str, session_key: str) -> EngineSession | None:
        """The mapping of a host key, or None."""
        row = self.store.conn.execute(ENGINE_SESSION_SQL, [host, session_key]).fetchone()
        return None if row is None else EngineSession(*row)

    def list(self, host: str) -> list[EngineSession]:
        """Every mapping of a host, most recently used first."""
        return [EngineSession(*row) for row in self.store.conn.execute(ENGINE_SESSIONS_SQL, [host])]

    def ensure(
        self,
        host: str,
        session_key: str,
        host_session_id: str | None = None,
        *,
        cwd: str | None = None,
    ) -> EngineSession:
        """The session of a host key, created on first use.

        A key whose host session id changed (OpenClaw's ``/new`` or ``/reset``) gets a
        new session; the old one stays as it was. A new session takes the host's
        session id as its id when that id is free, and the key as its title, so that
        `nexus-store sessions` shows it.

        Args:
            host: The host (``openclaw``).
            session_key: Its session key.
            host_session_id: Its current session id for the key.
            cwd: Working directory of a new session.

        Returns:
            The mapping.
        """
        _check_text("session key", session_key)
        _check_text("session id", host_session_id)
        found = self.find(host, session_key)
        if found is not None and (
            host_session_id is None or found.host_session_id in (None, host_session_id)
        ):
            if found.host_session_id is None and host_session_id is not None:
                self._update(host, session_key, "host_session_id", host_session_id)
                return self.find(host, session_key) or found
            return found
        with self.store.atomic():
            found = self.find(host, session_key)  # under the write lock: another may have won
            if found is not None and (
                host_session_id is None or found.host_session_id in (None, host_session_id)
            ):
                return found
            session = self._new_session(host_session_id, cwd=cwd, title=session_key)
            now = _now()
            if found is None:
                self.store.conn.execute(
                    "insert into engine_sessions (host, session_key, session_id, host_session_id, "
                    "created_utc, updated_utc) values (?, ?, ?, ?, ?, ?)",
                    [host, session_key, self._key(session), host_session_id, now, now],
                )
            else:
                # a new host session: its transcript is another one, read from its start
                self.store.conn.execute(
                    "update engine_sessions set session_id = ?, host_session_id = ?, "
                    "source_seq = null, updated_utc = ? where host = ? and session_key = ?",
                    [self._key(session), host_session_id, now, host, session_key],
                )
        result = self.find(host, session_key)
        assert result is not None
        return result

    def link(
        self,
        host: str,
        session_key: str,
        session_id: str,
        *,
        host_session_id: str | None = None,
        parent_key: str | None = None,
        context_mode: str | None = None,
    ) -> EngineSession:
        """Map a host key to an existing session (a prepared sub-agent's).

        Raises:
            InvalidEntry: If the key is already mapped to another session.
            SessionNotFound: If the session does not exist.
        """
        _check_text("session key", session_key)
        now = _now()
        with self.store.atomic():
            found = self.find(host, session_key)
            if found is not None and found.session_id != session_id:
                raise InvalidEntry(
                    f"session key {session_key!r} already belongs to session {found.session_id}"
                )
            if found is None:
                self.store.conn.execute(
                    "insert into engine_sessions (host, session_key, session_id, host_session_id, "
                    "parent_key, context_mode, created_utc, updated_utc) "
                    "values (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        host,
                        session_key,
                        self._key(session_id),
                        host_session_id,
                        parent_key,
                        context_mode,
                        now,
                        now,
                    ],
                )
        result = self.find(host, session_key)
        assert result is not None
        return result

    def end(self, host: str, session_key: str, reason: str) -> EngineSession | None:
        """Record that a sub-agent's key ended; None when the key is unknown."""
        if self.find(host, session_key) is None:
            return None
        self._update(host, session_key, "ended_reason", reason)
        return self.find(host, session_key)

    # -- commits --------------------------------------------------------------------------

    def commit_turn(
        self,
        host: str,
        advancement_key: str,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        session_key: str | None = None,
        source_seq: int | None = None,
        stored_turn: str | None = None,
    ) -> CommitOutcome:
        """Store an accepted turn once per advancement key, in one transaction.

        The messages become one turn under the session's active leaf, and the key is
        recorded with it; a key committed before returns ``duplicate`` and writes
        nothing (also when two processes commit it at once).

        Args:
            host: The host (``openclaw``).
            advancement_key: The host's key of the turn.
            session_id: The session.
            messages: The turn's messages.
            session_key: With ``source_seq``: the mapping whose `EngineSession.source_seq`
                moves to ``source_seq`` in the same transaction.
            source_seq: The host transcript's ``seq`` of the turn's last entry.
            stored_turn: The turn already holds these messages (reconciled from the
                host's transcript before its commit arrived): the key is recorded
                against that turn and nothing is written (``duplicate``).

        Raises:
            SessionNotFound: If the session does not exist.
            InvalidEntry: If a message cannot be stored (nothing is written).
        """
        # one key space for every host: OpenClaw's keys are UUID-based and unique
        _check_text("advancement key", advancement_key)
        earlier = self._committed(advancement_key)
        if earlier is not None:
            return earlier
        try:
            with self.store.atomic():
                earlier = self._committed(advancement_key)
                if earlier is not None:
                    return earlier
                if stored_turn is not None:
                    turn_id: str | None = stored_turn
                else:
                    turn = self.store.append_messages(session_id, messages) if messages else None
                    turn_id = None if turn is None else turn.id
                self.store.conn.execute(
                    "insert into turn_commits (advancement_key, session_id, turn_id, messages, "
                    "committed_utc) values (?, ?, ?, ?, ?)",
                    [
                        advancement_key,
                        self._key(session_id),
                        None if turn_id is None else self._turn_key(session_id, turn_id),
                        len(messages),
                        _now(),
                    ],
                )
                if session_key is not None and source_seq is not None:
                    self.advance(host, session_key, source_seq)
        except sqlite3.IntegrityError:
            # PostgreSQL: another connection committed the same key first (its unique
            # index refused ours; our transaction, turn included, rolled back)
            earlier = self._committed(advancement_key)
            if earlier is None:
                raise
            return earlier
        status: Literal["committed", "duplicate"] = (
            "duplicate" if stored_turn is not None else "committed"
        )
        return CommitOutcome(status, session_id, turn_id)

    def advance(self, host: str, session_key: str, seq: int, *, path: str | None = None) -> None:
        """Move a mapping's `EngineSession.source_seq` forward to ``seq`` (never back).

        Args:
            host: The host.
            session_key: The mapping's key.
            seq: The host transcript's last ``seq`` the session now holds.
            path: The host store it was read from (kept when None).
        """
        with self.store.atomic():
            self.store.conn.execute(SOURCE_SQL, [path, seq, _now(), host, session_key, seq])

    def shape(self, session_id: str) -> tuple[bool, str | None, str | None]:
        """``(has turns, parent session, fork turn)`` of a session, in O(1).

        Raises:
            SessionNotFound: If the session does not exist.
        """
        row = self.store.conn.execute(SESSION_SHAPE_SQL, [session_id]).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return bool(row[0]), row[1], row[2]

    def commits(self, session_id: str) -> int:
        """How many turn commits a session has."""
        row = self.store.conn.execute(
            "select count(*) from turn_commits where session_id = ?", [self._key(session_id)]
        ).fetchone()
        return int(row[0])

    # -- helpers --------------------------------------------------------------------------

    def _committed(self, advancement_key: str) -> CommitOutcome | None:
        row = self.store.conn.execute(COMMIT_BY_KEY_SQL, [advancement_key]).fetchone()
        return None if row is None else CommitOutcome("duplicate", row[0], row[1])

    def _new_session(self, wanted: str | None, *, cwd: str | None, title: str) -> str:
        uid = wanted if wanted and self.store.find_session(wanted) is None else None
        return self.store.create_session(id=uid or str(uuid.uuid4()), cwd=cwd, title=title).id

    def _key(self, session_id: str) -> int:
        row = self.store.conn.execute(
            "select id from sessions where uid = ?", [session_id]
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return int(row[0])

    def _turn_key(self, session_id: str, turn_id: str) -> int | None:
        row = self.store.conn.execute(
            "select id from turns where session_id = ? and uid = ?",
            [self._key(session_id), turn_id],
        ).fetchone()
        return None if row is None else int(row[0])

    def _update(self, host: str, session_key: str, column: str, value: str) -> None:
        with self.store.atomic():
            self.store.conn.execute(UPDATE_SQL[column], [value, _now(), host, session_key])


def _check_text(what: str, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or not is_storable_text(value):
        raise InvalidEntry(
            f"{what} {value!r} must be a non-empty string without NUL or lone surrogates"
        )


def _now() -> str:
    return utc_now()
