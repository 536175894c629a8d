"""Appending turns: the write path of a session (part `Appends`).

An append reads the session and the parent row in one statement, computes the new
turn's path values with `nexus_store.store.pathvalues.path_values`, and inserts the
turn and its messages, all in one transaction; two writers appending to the same
parent make two siblings, a branch, and lose nothing. `turn_values` builds the
column values of a turn; imports and copies call it too, so a turn is written one
way whatever its source.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_store import jsoncodec
from nexus_store.errors import InvalidEntry, SessionNotFound, TurnNotFound
from nexus_store.models import Turn, stored_turn
from nexus_store.rows import dumps, encode_entry_fields, message_rows, turn_payload
from nexus_store.store import compressed
from nexus_store.store.db import Handle, SessionTail, unstorable, utc_now
from nexus_store.store.indexqueue import queue_messages
from nexus_store.store.leaves import ACTIVE_LEAF, dangling
from nexus_store.store.pathvalues import PathRow, PathValues, child_row, path_values
from nexus_store.store.reading import Reading
from nexus_store.store.sql import (
    MESSAGE_INSERT_COLUMNS,
    MESSAGES_PER_STATEMENT,
    PARENT_BY_UID_SQL,
    SESSION_AND_LEAF_SQL,
    SESSION_AND_PARENT_SQL,
    TURN_COLUMNS,
    insert_rows_sql,
)
from nexus_store.tokens import TokenCounter, message_tokens

__all__ = ["ACTIVE_LEAF", "Appends", "turn_values"]


class Appends:
    """Appending entries to sessions (``Store.append_*``, ``set_label``).

    Args:
        db: The database handle.
        reading: The reading part (an id is checked before a label names it).
    """

    def __init__(self, db: Handle, reading: Reading) -> None:
        self.db = db
        self.reading = reading

    def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> Turn:
        """Append a pi v3 entry as a new turn and make it the active leaf.

        Args:
            session_id: The session.
            entry: ``{"type": ..., ...}``. ``"id"`` is optional (generated). Without a
                ``"parentId"`` key the turn is a child of the active leaf;
                ``"parentId": None`` makes a new root; a turn id makes a child of it
                (appending twice to one parent makes a branch).

        Returns:
            The new turn.

        Raises:
            SessionNotFound: If the session does not exist.
            TurnNotFound: If ``parentId`` names no turn of this session.
            InvalidEntry: If the entry breaks the model's rules (no type, a message
                without a role, a compaction whose first kept turn is not an ancestor,
                a duplicated id, ...).
        """
        if not isinstance(entry, Mapping):
            raise InvalidEntry(f"an entry must be a dict, not {type(entry).__name__}")
        entry = dict(entry)
        _validate_native(entry)
        db = self.db
        if db.in_transaction and db.dialect.statement_rollback and _few_messages(entry):
            # Inside a caller's transaction on SQLite no savepoint is needed: the append
            # writes with two statements, each atomic on its own, and `_append` undoes
            # the first if the second fails (see `_settle`).
            db.appending = True
            try:
                return self._append(session_id, entry, guarded=True)
            except BaseException:
                db.taint()
                raise
            finally:
                db.appending = False
        with db.atomic(keep_deferred=True):
            db.appending = True
            try:
                return self._append(session_id, entry, guarded=False)
            except BaseException:
                db.taint()
                raise
            finally:
                db.appending = False

    def _append(self, session_id: str, entry: dict[str, Any], *, guarded: bool) -> Turn:
        """`append_entry` inside its transaction (the handle's ``appending`` is set).

        ``guarded``: no savepoint encloses the append (a caller's SQLite transaction),
        so a failure after the turn's row was written is settled here (`_settle`).
        """
        db = self.db
        explicit = "parentId" in entry and entry["parentId"] is not None
        if explicit and not isinstance(entry["parentId"], str):
            raise InvalidEntry(
                f"parentId must be a turn id (a string) or None, not {entry['parentId']!r}"
            )
        if explicit and unstorable(entry["parentId"]):
            # no stored id has a lone surrogate (it is not UTF-8): report, don't crash
            raise TurnNotFound(
                f"no turn with id {entry['parentId']!r} in session {session_id!r} (parentId)"
            )
        tail = db.tail(session_id)
        pending = tail is not None
        if not pending:
            # the row as this handle's last commit wrote it, if provably unchanged
            tail = db.known_tail(session_id)
        fork = None
        if tail is not None and (
            "parentId" not in entry or (explicit and entry["parentId"] == tail.leaf.uid)
        ):
            # An earlier append of this transaction (or of the last one, `known_tail`)
            # left the session here: its row is written once, before the commit or any
            # other statement (db.SessionTail).
            session_key, last_seq, fork_key = tail.key, tail.last_seq, tail.fork_key
            parent: PathRow | None = tail.leaf
        else:
            if pending:
                db.flush_tails()  # the read below must see the session as written
            db.lock_session(session_id)
            if explicit:
                row = db.execute(SESSION_AND_PARENT_SQL, [entry["parentId"], session_id]).fetchone()
            else:
                row = db.execute(SESSION_AND_LEAF_SQL, [session_id]).fetchone()
            if row is None:
                raise SessionNotFound(f"no session with id {session_id!r}")
            session_key, last_seq, fork_key = row[0], row[1], row[2]
            parent = (
                None
                if row[3] is None or ("parentId" in entry and not explicit)
                else PathRow._make(row[3:])
            )
            if explicit and parent is None:
                raise TurnNotFound(
                    f"no turn with id {entry['parentId']!r} in session {session_id!r} (parentId)"
                )
            if parent is None and "parentId" not in entry:
                # refuse, never misroute to a new root (issue 18: a dangling active leaf)
                active = db.session_row(session_id)[1]
                if active is not None:
                    raise dangling(session_id, active)
            if parent is None and fork_key is not None:
                # A root of a forked session continues the parent session's path.
                fork = db.parent_row(fork_key)
        now = utc_now()
        if "timestamp" not in entry:
            entry["timestamp"] = now
        try:
            turn, leaf = self._insert_turn(
                session_key, session_id, parent, entry, seq=last_seq + 1, fork=fork
            )
        except BaseException:
            if guarded:
                self._settle(session_id, session_key, last_seq + 1, fork_key, now, entry)
            raise
        db.set_tail(session_id, SessionTail(session_key, turn.seq, fork_key, leaf, now))
        return turn

    def append_message(
        self, session_id: str, message: Mapping[str, Any], *, parent_id: Any = ACTIVE_LEAF
    ) -> Turn:
        """Append one agent message (a ``message`` turn).

        Args:
            session_id: The session.
            message: A pi agent message, e.g. ``{"role": "user", "content": "hi",
                "timestamp": 0}``.
            parent_id: ACTIVE_LEAF (default), None for a new root, or a turn id.

        Returns:
            The new turn.
        """
        return self.append_entry(
            session_id, _with_parent({"type": "message", "message": message}, parent_id)
        )

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        parent_id: Any = ACTIVE_LEAF,
    ) -> Turn:
        """Append a whole exchange as one turn carrying several messages, in order."""
        entry = {"type": "message", "messages": [dict(m) for m in messages]}
        return self.append_entry(session_id, _with_parent(entry, parent_id))

    def append_compaction(
        self,
        session_id: str,
        summary: str,
        first_kept_turn_id: str,
        tokens_before: int,
        *,
        parent_id: Any = ACTIVE_LEAF,
        **fields: Any,
    ) -> Turn:
        """Append a compaction turn (its first kept turn must be an ancestor).

        Extra keyword fields (``tokensAfter``, ``trigger``, ``layer``, ``details``,
        ``customInstruction``, ``messagesCompacted``) are stored on the entry.
        """
        entry = {
            "type": "compaction",
            "summary": summary,
            "firstKeptEntryId": first_kept_turn_id,
            "tokensBefore": tokens_before,
            **fields,
        }
        return self.append_entry(session_id, _with_parent(entry, parent_id))

    def append_branch_summary(
        self, session_id: str, from_id: str | None, summary: str, *, details: Any = None
    ) -> Turn:
        """Go back to ``from_id`` (None: before the first turn) with a summary of the branch left.

        As pi's ``branchWithSummary``: the summary turn becomes a child of ``from_id``
        and the new active leaf.
        """
        entry: dict[str, Any] = {
            "type": "branch_summary",
            "parentId": from_id,
            "fromId": from_id if from_id is not None else "root",
            "summary": summary,
        }
        if details is not None:
            entry["details"] = details
        return self.append_entry(session_id, entry)

    def set_label(self, session_id: str, target_id: str, label: str | None) -> Turn:
        """Set (or clear, with None or "") the label of a turn, as a ``label`` turn."""
        self.reading.get_turn(session_id, target_id)
        entry: dict[str, Any] = {"type": "label", "targetId": target_id}
        if label is not None:
            entry["label"] = label
        return self.append_entry(session_id, entry)

    def _settle(
        self,
        session_id: str,
        session_key: int,
        seq: int,
        fork_key: int | None,
        now: str,
        entry: dict[str, Any],
    ) -> None:
        """Leave the store consistent after an append failed without a savepoint.

        The turn's row and its messages are written by one statement each. If the turn
        is not there, nothing was written. If it is there without its messages (their
        statement failed, so none of them is), its row is deleted. If it is complete
        (an interrupt after the last statement), the append stands: the session moves
        to it as after any append, and the error goes on.
        """
        db = self.db
        row = db.execute(
            "select id from turns where session_id = ? and seq = ?", [session_key, seq]
        ).fetchone()
        if row is None:
            return
        key = int(row[0])
        has_messages = bool(turn_payload(entry)[2])
        written = db.execute("select 1 from messages where turn_id = ? limit 1", [key]).fetchone()
        if has_messages and written is None:
            db.execute("delete from turns where id = ?", [key])
            return
        leaf = db.parent_row(key)
        if leaf is not None:
            db.set_tail(session_id, SessionTail(session_key, seq, fork_key, leaf, now))

    def _insert_turn(
        self,
        session_key: int,
        session_id: str,
        parent: PathRow | None,
        entry: dict[str, Any],
        *,
        seq: int,
        fork: PathRow | None = None,
    ) -> tuple[Turn, PathRow]:
        """Insert one turn (and its messages) under ``parent`` as ``seq``; inside a transaction.

        ``fork``: for a root of a forked session, the parent session's fork turn, from
        which the root takes its path values (it stays a root of its own session).

        Returns:
            The turn and its row as the parent of later turns. The caller updates the
            session's ``last_seq`` (and the active leaf).
        """
        db = self.db
        kind, skip, message_dicts = turn_payload(entry)
        counts = [message_tokens(db.counter, m) for m in message_dicts]
        # A compaction points at itself (compaction_id), so its key is taken before the
        # insert (the dialect's next_turn_key is ours alone).
        key: int | None = db.next_turn_key() if kind == "compaction" else None
        uid = entry.get("id")
        generated = not isinstance(uid, str)
        if generated and "id" in entry:
            raise InvalidEntry(f"entry id must be a string, not {entry['id']!r}")
        values, child = turn_values(
            db,
            session_key,
            session_id,
            parent,
            entry,
            kind,
            skip,
            message_dicts,
            counts,
            seq=seq,
            key=key,
            uid=uid if isinstance(uid, str) else "",
            native=True,
            fork=fork,
        )
        inserted = None
        for _attempt in range(100):
            if generated:
                values["uid"] = secrets.token_hex(4)
            inserted = db.dialect.insert_turn(db, values)
            if inserted is not None:
                break
            if not generated:
                raise InvalidEntry(
                    f"a turn with id {uid!r} already exists in session {session_id!r}"
                )
        if inserted is None:
            raise InvalidEntry(f"no free generated turn id in session {session_id!r}")
        key = inserted if key is None else key
        rows = message_rows(key, message_dicts, counts)
        chars = sum(len(row["text"] or "") for row in rows)  # before packing empties text
        if db.dialect.capabilities.compressed_content:
            compressed.pack_rows(rows)
        for start in range(0, len(rows), MESSAGES_PER_STATEMENT):
            chunk = rows[start : start + MESSAGES_PER_STATEMENT]
            # only the columns some row fills (`insert_rows_sql`)
            filled = {c for row in chunk for c, v in row.items() if v is not None}
            columns = tuple([c for c in MESSAGE_INSERT_COLUMNS if c in filled])
            db.execute(
                insert_rows_sql("messages", columns, len(chunk)),
                [row[c] for row in chunk for c in columns],
            )
        if rows:
            # indexed for search in bulk with the tail they join (store/indexqueue.py)
            queue_messages(db, chars, len(rows))
        final = dict(entry)
        final["id"] = values["uid"]
        final["parentId"] = None if parent is None else parent.uid
        model_json = values["active_model_json"]
        turn = stored_turn(
            id=values["uid"],
            session_id=session_id,
            parent_id=final["parentId"],
            kind=kind,
            seq=seq,
            timestamp=values["created_utc"],
            depth=values["depth"],
            tokens=values["tokens"],
            path_tokens=values["path_tokens"],
            context_tokens=values["context_tokens"],
            compactions=values["compaction_count"],
            compaction_id=child.compaction_uid,
            model=None if model_json is None else jsoncodec.loads(model_json),
            thinking_level=values["active_thinking_level"],
            entry=final,
        )
        uid = values["uid"]
        leaf = child._replace(
            id=key, uid=uid, compaction_uid=uid if kind == "compaction" else child.compaction_uid
        )
        return turn, leaf


def turn_values(
    db: Handle,
    session_key: int,
    session_id: str,
    parent: PathRow | None,
    entry: dict[str, Any],
    kind: str,
    skip: frozenset[str],
    message_dicts: list[dict[str, Any]],
    counts: list[int],
    *,
    seq: int,
    key: int | None,
    uid: str,
    native: bool,
    patch: Mapping[str, Any] | None = None,
    fork: PathRow | None = None,
) -> tuple[dict[str, Any], PathRow]:
    """The column values of a new turn, and its row as a parent of later turns.

    Appends, imports and copies all write a turn's row with this function. Path
    values come from `path_values`; a compaction's first kept turn is resolved
    (and, for native appends, must be an ancestor; an import keeps what it says).

    Raises:
        InvalidEntry: If a native compaction's first kept turn is not an ancestor.
    """
    fields = encode_entry_fields(entry, skip)
    tokens = sum(counts)
    if kind in ("branch_summary", "compaction"):
        summary = entry.get("summary")
        if isinstance(summary, str) and summary:
            tokens = _summary_tokens(db.counter, summary)
    base = parent if parent is not None else fork
    kept: PathRow | None = None
    if kind == "compaction":
        first_uid = entry.get("firstKeptEntryId")
        found: PathRow | None = None
        if isinstance(first_uid, str):
            row = db.execute(PARENT_BY_UID_SQL, [session_key, first_uid]).fetchone()
            found = None if row is None else PathRow._make(row)
        if found is not None and base is not None and db.is_ancestor(found, base):
            kept = found
        elif native:
            # (a compaction naming itself is no ancestor either: issue 18; an import
            # keeps what a transcript wrote, where it keeps nothing before it)
            raise InvalidEntry(
                f"compaction firstKeptEntryId {first_uid!r} is not an ancestor of the new "
                f"compaction in session {session_id!r}; keep a turn on the path to its parent"
            )
    path = path_values(
        parent,
        key=key,
        seq=seq,
        kind=kind,
        tokens=tokens,
        fork=fork,
        kept=kept,
        entry=entry,
        messages=message_dicts,
    )
    values: dict[str, Any] = dict.fromkeys(TURN_COLUMNS)
    values.update(fields)
    values.update(zip(PathValues._fields, path, strict=True))
    values.update(
        id=key,
        session_id=session_key,
        uid=uid,
        parent_id=None if parent is None else parent.id,
        seq=seq,
        kind=kind,
        tokens=tokens,
        first_kept_turn_id=None if kept is None else kept.id,
        source_patch_json=dumps(patch) if patch else None,
    )
    child = child_row(
        path, key=key or 0, seq=seq, kind=kind, tokens=tokens, uid=uid, parent=parent, fork=fork
    )
    return values, child


def _summary_tokens(counter: TokenCounter, summary: str) -> int:
    return message_tokens(counter, {"role": "compactionSummary", "summary": summary})


def _few_messages(entry: Mapping[str, Any]) -> bool:
    """Whether an entry's messages fit one insert statement (`MESSAGES_PER_STATEMENT`)."""
    messages = entry.get("messages")
    return not isinstance(messages, list) or len(messages) <= MESSAGES_PER_STATEMENT


def _with_parent(entry: dict[str, Any], parent_id: Any) -> dict[str, Any]:
    if parent_id is not ACTIVE_LEAF:
        entry["parentId"] = parent_id
    return entry


def _validate_native(entry: dict[str, Any]) -> None:
    for key, value in entry.items():
        # Entries are JSON: refuse what JSON cannot hold here, not as a TypeError later.
        try:
            # (no NaN or Infinity: JSON has none, and JavaScript writes them as null)
            jsoncodec.check(value)
        except (TypeError, ValueError, RecursionError) as err:
            raise InvalidEntry(f"entry field {key!r} is not JSON: {err}") from None
        if not isinstance(key, str) or unstorable(key):
            raise InvalidEntry(f"entry keys must be text, not {key!r}")
    if unstorable(entry.get("id")):
        raise InvalidEntry(f"entry id {entry['id']!r} holds a lone surrogate or NUL (not text)")
    kind = entry.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidEntry(
            f"an entry needs a 'type' string (message, compaction, ...), got {kind!r}"
        )
    if kind == "session":
        raise InvalidEntry("'session' is a transcript header, not an entry; use create_session()")
    if kind == "message":
        if "message" in entry:
            message = entry["message"]
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise InvalidEntry("a message entry needs 'message': a dict with a 'role' string")
        elif "messages" in entry:
            messages = entry["messages"]
            if (
                not isinstance(messages, list)
                or not messages
                or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
            ):
                raise InvalidEntry(
                    "'messages' must be a non-empty list of dicts with a 'role' string"
                )
        else:
            raise InvalidEntry("a message entry needs a 'message' dict")
    elif kind == "compaction":
        if not isinstance(entry.get("summary"), str):
            raise InvalidEntry("a compaction entry needs a 'summary' string")
        if not isinstance(entry.get("firstKeptEntryId"), str):
            raise InvalidEntry(
                "a compaction entry needs 'firstKeptEntryId': the id of an ancestor turn"
            )
    elif kind == "label" and not isinstance(entry.get("targetId"), str):
        raise InvalidEntry("a label entry needs a 'targetId' string")
