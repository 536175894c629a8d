"""The store's reading methods: sessions, turns, tree navigation, context and status.

The part `Reading(db)`; every method reads through the handle. Context
assembly is one SQL query (`nexus_store.store.sql.CONTEXT_SQL`) whose cost follows the size of the
context; status reads the path values stored on the leaf and costs O(1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from nexus_store import jsoncodec
from nexus_store.assemble import build_messages
from nexus_store.errors import SessionNotFound, TurnNotFound
from nexus_store.models import Context, ContextStatus, Session, Turn, stored_turn
from nexus_store.rows import TURN_FIELD_COLUMNS, decode_message, entry_from_parts, is_storable_text
from nexus_store.store.db import Handle
from nexus_store.store.resets import latest_reset
from nexus_store.store.sql import CONTENT_TEXT, SESSION_SQL, TURN_SQL
from nexus_store.store.status import (
    DEFAULT_LIMITS,
    resolve_session_id,
    session_and_leaf,
    status_figures,
)

if TYPE_CHECKING:
    from nexus_store.compaction.policy import CompactionConfig

__all__ = ["Reading"]

_FIELD_COLUMNS = [column for _, column, _ in TURN_FIELD_COLUMNS]
_TURN_SELECT = TURN_SQL.format(fields=", ".join(f"t.{c}" for c in _FIELD_COLUMNS))
_N_BASE = 16  # columns of TURN_SQL before the entry field columns
_MESSAGE_SELECT = (
    f"select turn_id, role, content_kind, content_json, {CONTENT_TEXT}, tool_call_id, "
    "tool_name, is_error, provider, model, api, stop_reason, timestamp_ms, extra_json "
    "from messages_text m"
)


def _storable(value: object) -> bool:
    """Whether an id can be looked up at all (see rows.is_storable_text)."""
    return isinstance(value, str) and is_storable_text(value)


class Reading:
    """Reading sessions, turns, paths and contexts (part of `Store`; see there).

    Args:
        db: The database handle.
    """

    def __init__(self, db: Handle) -> None:
        self.db = db

    # -- sessions ----------------------------------------------------------------------

    def _session_from_row(self, row: Sequence[Any]) -> Session:
        return Session(
            id=row[0],
            cwd=row[1],
            title=row[2],
            created_utc=row[3],
            updated_utc=row[4],
            active_leaf=row[5],
            parent_session=row[6],
            fork_turn=row[7],
            source_format=row[8],
            source_path=row[9],
            source_id=row[10],
            flush_epoch=row[11],
            turn_count=row[12],
        )

    def find_session(self, session_id: str) -> Session | None:
        """Return the session with this id, or None."""
        if not _storable(session_id):
            return None
        row = self.db.execute(SESSION_SQL + " where s.uid = ?", [session_id]).fetchone()
        return None if row is None else self._session_from_row(row)

    def get_session(self, session_id: str) -> Session:
        """Return the session with this id.

        Raises:
            SessionNotFound: If there is none.
        """
        session = self.find_session(session_id)
        if session is None:
            raise SessionNotFound(f"no session with id {session_id!r}")
        return session

    def iter_sessions(self) -> Iterator[Session]:
        """Yield every session, most recently updated first."""
        for row in self.db.execute(SESSION_SQL + " order by s.updated_utc desc, s.id desc"):
            yield self._session_from_row(row)

    def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """Return sessions, most recently updated first (at most ``limit``)."""
        sql = SESSION_SQL + " order by s.updated_utc desc, s.id desc"
        params: list[Any] = []
        if limit is not None:
            sql += " limit ?"
            params.append(limit)
        return [self._session_from_row(row) for row in self.db.execute(sql, params)]

    def resolve_session(self, ref: str) -> Session:
        """Find a session by id, unique id prefix, or ``latest`` (most recently updated).

        Raises:
            SessionNotFound: If nothing or more than one session matches.
        """
        return self.get_session(resolve_session_id(self.db, ref))

    # -- turns ---------------------------------------------------------------------------

    def _messages_of(self, keys: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
        found: dict[int, list[dict[str, Any]]] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ", ".join("?" * len(chunk))
            sql = f"{_MESSAGE_SELECT} where turn_id in ({marks}) order by turn_id, idx"
            for row in self.db.execute(sql, chunk):
                found.setdefault(row[0], []).append(
                    decode_message(row[1], row[2], row[3], row[4], tuple(row[5:13]), row[13])
                )
        return found

    def _turns_from_rows(self, session_id: str, rows: list[Sequence[Any]]) -> list[Turn]:
        messages = self._messages_of([row[0] for row in rows])
        turns = []
        for row in rows:
            columns = dict(zip(_FIELD_COLUMNS, row[_N_BASE:], strict=True))
            entry = entry_from_parts(row[3], row[1], row[2], columns, row[14])
            found = messages.get(row[0], [])
            if row[3] == "message" and found:
                if len(found) > 1:
                    entry["messages"] = found
                else:
                    entry["message"] = found[0]
            elif row[3] == "custom_message" and found and "content" in found[0]:
                entry["content"] = found[0]["content"]
            turns.append(
                stored_turn(
                    id=row[1],
                    session_id=session_id,
                    parent_id=row[2],
                    kind=row[3],
                    seq=row[4],
                    timestamp=row[5],
                    depth=row[6],
                    tokens=row[7],
                    path_tokens=row[8],
                    context_tokens=row[9],
                    compactions=row[10],
                    compaction_id=row[11],
                    model=None if row[12] is None else jsoncodec.loads(row[12]),
                    thinking_level=row[13],
                    entry=entry,
                )
            )
        return turns

    def find_turn(self, session_id: str, turn_id: str) -> Turn | None:
        """Return a turn of the session, or None."""
        session_key, _ = self.db.session_row(session_id)
        if not _storable(turn_id):
            return None
        rows = self.db.execute(
            _TURN_SELECT + " where t.session_id = ? and t.uid = ?", [session_key, turn_id]
        ).fetchall()
        turns = self._turns_from_rows(session_id, rows)
        return turns[0] if turns else None

    def get_turn(self, session_id: str, turn_id: str) -> Turn:
        """Return a turn of the session.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If the turn is not in it.
        """
        turn = self.find_turn(session_id, turn_id)
        if turn is None:
            raise TurnNotFound(f"no turn with id {turn_id!r} in session {session_id!r}")
        return turn

    def iter_turns(self, session_id: str, *, batch: int = 1000) -> Iterator[Turn]:
        """Yield every turn of the session in append order, a batch at a time."""
        session_key, _ = self.db.session_row(session_id)
        last = -1
        while True:
            rows = self.db.execute(
                _TURN_SELECT + " where t.session_id = ? and t.seq > ? order by t.seq limit ?",
                [session_key, last, batch],
            ).fetchall()
            if not rows:
                return
            yield from self._turns_from_rows(session_id, rows)
            last = rows[-1][4]

    def children(self, session_id: str, turn_id: str | None) -> list[Turn]:
        """Return the children of a turn (roots for None), in append order."""
        session_key, _ = self.db.session_row(session_id)
        if turn_id is None:
            where, params = "t.session_id = ? and t.parent_id is null", [session_key]
        else:
            key = self.db.turn_key(session_key, session_id, turn_id)
            where, params = "t.parent_id = ?", [key]
        rows = self.db.execute(_TURN_SELECT + f" where {where} order by t.seq", params).fetchall()
        return self._turns_from_rows(session_id, rows)

    def leaves(self, session_id: str) -> list[Turn]:
        """Return the turns without children (the tips of every branch), in append order."""
        session_key, _ = self.db.session_row(session_id)
        rows = self.db.execute(
            _TURN_SELECT + " where t.session_id = ?"
            " and not exists (select 1 from turns c where c.parent_id = t.id)"
            " order by t.seq",
            [session_key],
        ).fetchall()
        return self._turns_from_rows(session_id, rows)

    def _leaf_key(self, session_id: str, leaf_id: str | None) -> tuple[int, int | None]:
        return session_and_leaf(self.db, session_id, leaf_id)

    def path_keys(self, session_key: int, leaf_key: int, stop_depth: int = 0) -> list[int]:
        """Keys of the turns on the path to a leaf, from the turn at ``stop_depth`` down."""
        rows = self.db.execute(
            self.db.dialect.statements.path,
            {"leaf": leaf_key, "session": session_key, "stop_depth": stop_depth},
        ).fetchall()
        return [row[0] for row in rows]

    def path(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """Return the turns from the root to a leaf (default: the active leaf), root first."""
        session_key, leaf_key = self._leaf_key(session_id, leaf_id)
        if leaf_key is None:
            return []
        keys = self.path_keys(session_key, leaf_key)
        rows: list[Sequence[Any]] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows.extend(
                self.db.execute(
                    _TURN_SELECT + f" where t.id in ({marks}) order by t.depth", chunk
                ).fetchall()
            )
        return self._turns_from_rows(session_id, rows)

    def common_ancestor(self, session_id: str, a: str, b: str) -> Turn | None:
        """Return the deepest turn on the paths to both ``a`` and ``b`` (None if none)."""
        session_key, _ = self.db.session_row(session_id)
        key_a = self.db.turn_key(session_key, session_id, a)
        key_b = self.db.turn_key(session_key, session_id, b)
        on_a = set(self.path_keys(session_key, key_a))
        for key in reversed(self.path_keys(session_key, key_b)):
            if key in on_a:
                uid = self.db.execute("select uid from turns where id = ?", [key]).fetchone()[0]
                return self.get_turn(session_id, uid)
        return None

    def labels(self, session_id: str) -> dict[str, str]:
        """Return each labelled turn's current label (pi: the latest label entry wins)."""
        session_key, _ = self.db.session_row(session_id)
        labels: dict[str, str] = {}
        for target, label, extra in self.db.execute(
            "select target_uid, label, extra_json from turns "
            "where session_id = ? and kind = 'label' order by seq",
            [session_key],
        ):
            if label is None and extra:
                value = jsoncodec.loads(extra).get("label")
                label = value if isinstance(value, str) else None
            if target is None:
                continue
            if label:
                labels[target] = label
            else:
                labels.pop(target, None)
        return labels

    # -- context -------------------------------------------------------------------------

    def context(self, session_id: str, leaf_id: str | None = None) -> Context:
        """Assemble the context of a leaf (default: the active leaf) with pi's semantics.

        Args:
            session_id: The session.
            leaf_id: The leaf; None for the session's active leaf.

        Returns:
            The messages pi's buildSessionContext would give, with model, thinking
            level and token count.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If the leaf is not in the session.
        """
        session_key, leaf_key = self._leaf_key(session_id, leaf_id)
        if leaf_key is None:
            return Context.model_construct(
                session_id=session_id,
                leaf_id=None,
                messages=[],
                model=None,
                thinking_level="off",
                tokens=0,
                turn_ids=[],
                turn_kinds=[],
                message_tokens=[],
            )
        leaf = self.db.execute(
            "select t.uid, t.kind, t.compaction_id, t.context_tokens, t.active_model_json, "
            "t.active_thinking_level, c.depth, k.depth "
            "from turns t left join turns c on c.id = t.compaction_id "
            "left join turns k on k.id = c.first_kept_turn_id where t.id = ?",
            [leaf_key],
        ).fetchone()
        compaction = leaf[2]
        stop_depth = leaf[7] if leaf[7] is not None else (leaf[6] if leaf[6] is not None else 0)
        reset = latest_reset(self.db, session_key, leaf_key, leaf[6])  # OpenClaw's resets
        if reset is not None:
            compaction, stop_depth = None, reset.stop_depth
        rows = self.db.execute(
            self.db.dialect.statements.context,
            {
                "leaf": leaf_key,
                "session": session_key,
                "stop_depth": stop_depth,
                "compaction": compaction,
            },
        )
        messages, turn_ids, kinds, tokens = build_messages(rows, compaction)
        if reset is not None:
            messages, turn_ids, kinds, tokens = reset.keep(messages, turn_ids, kinds, tokens)
        return Context.model_construct(
            session_id=session_id,
            leaf_id=leaf[0],
            messages=messages,
            model=None if leaf[4] is None else jsoncodec.loads(leaf[4]),
            thinking_level=leaf[5],
            tokens=leaf[3] if reset is None else sum(tokens),
            turn_ids=turn_ids,
            turn_kinds=kinds,
            message_tokens=tokens,
        )

    def status(
        self,
        session_id: str,
        leaf_id: str | None = None,
        *,
        window: int | None = None,
        config: CompactionConfig | None = None,
    ) -> ContextStatus:
        """How full a leaf's context is and how often its path was compacted, in O(1).

        Args:
            session_id: The session.
            leaf_id: The leaf; None for the active leaf.
            window: The model's context window in tokens (default: the config's, 200,000).
            config: Compaction settings: trigger formula and degradation limits.

        Returns:
            Tokens, window, percent, compactions on the path, the last compaction and
            the degradation risk.
        """
        limits = DEFAULT_LIMITS if config is None else config.risk_limits
        figures = status_figures(self.db, session_id, leaf_id, window=window, limits=limits)
        return ContextStatus(**figures.as_dict())
