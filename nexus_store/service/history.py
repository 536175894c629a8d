"""A session's history from OpenClaw's own store: imported once, then reconciled.

OpenClaw keeps every turn in its agent database (``openclaw-agent.sqlite``, read with
`OpenClawStore`, read-only), also turns nexus_store never saw: the history of a session
that existed before nexus_store was selected, and the turns OpenClaw ran on its
``legacy`` engine after an engine error (it quarantines a failing engine for the rest
of the process). `HostHistory` brings both into the engine session:

* `HostHistory.import_session`: a session that has no turns here yet takes OpenClaw's
  whole transcript of it, entry by entry, with OpenClaw's ids, parents and compactions.
* `HostHistory.reconcile`: the message entries after the session's `source_seq` (the
  last seq it holds: committed, imported or reconciled) are appended under its active
  leaf, with OpenClaw's ids; OpenClaw's bookkeeping entries there (model snapshots,
  bootstrap context) are passed over.

Neither takes the current turn: OpenClaw writes the user's message before it asks the
engine for context, and that turn arrives by ``commitTurn``. So a trailing user message
that no assistant message follows is left for the commit (``before_seq`` says where the
commit's own range starts). An entry whose id the session already holds is never
appended again, and a commit whose first entry was reconciled is a duplicate.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from nexus_store.errors import InvalidEntry, TurnNotFound
from nexus_store.store import Store
from nexus_store.store.engine_sessions import EngineSession, EngineSessions
from nexus_store.store.openclaw_source import OpenClawStore

__all__ = ["CONTEXT_TYPES", "HostHistory"]

log = logging.getLogger("nexus_store.service")

# Entries that carry conversation (what a reconciliation takes); the others are
# OpenClaw's bookkeeping (model_change, custom, session_info, ...).
CONTEXT_TYPES = frozenset({"message", "custom_message", "compaction", "branch_summary"})


def _pending_from(entries: list[tuple[int, dict[str, Any]]]) -> int:
    """Index of the current turn's start: a last user message no assistant follows."""
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i][1]
        if entry.get("type") != "message":
            continue
        role = (entry.get("message") or {}).get("role")
        if role == "user":
            return i
        if role in ("assistant", "toolResult"):
            break
    return len(entries)


class HostHistory:
    """Imports and reconciles engine sessions from OpenClaw's store.

    Args:
        store: The nexus_store store.
        sessions: Its engine-session mappings.
    """

    def __init__(self, store: Store, sessions: EngineSessions) -> None:
        self.store = store
        self.sessions = sessions

    def _read(
        self, path: Path, host_session_id: str, after: int
    ) -> list[tuple[int, dict[str, Any]]]:
        with OpenClawStore(path) as source:
            parsed = source.read_session(host_session_id, after_seq=after)
            entries = [(item.line, item.entry) for item in parsed.entries]
        for problem in parsed.problems:
            log.warning("%s: %s", path, problem.message)
        return entries

    def import_session(self, session: EngineSession, host_session_id: str, path: Path) -> int:
        """Import OpenClaw's transcript of a session that holds nothing here yet.

        Every entry before the current turn, in order, with OpenClaw's ids and parents
        (compactions, branches and labels included). One transaction: all or nothing.

        Returns:
            The entries imported (0: OpenClaw holds no history of it before this turn).

        Raises:
            NexusError: The store cannot be read or an entry cannot be stored (nothing
                is written; the caller falls back to the messages OpenClaw passes).
        """
        entries = self._read(path, host_session_id, -1)
        entries = entries[: _pending_from(entries)]
        if not any(e.get("type") in CONTEXT_TYPES for _, e in entries):
            return 0
        with self.store.atomic():
            for _, entry in entries:
                self.store.append_entry(session.session_id, entry)
            self.sessions.advance("openclaw", session.session_key, entries[-1][0], path=str(path))
        return len(entries)

    def reconcile(
        self,
        session: EngineSession,
        host_session_id: str,
        path: Path,
        *,
        before_seq: int | None = None,
    ) -> int:
        """Append the turns OpenClaw kept after the session's `source_seq`.

        Args:
            session: The mapping (its ``source_seq`` says where to start; None: only
                after a first commit or import, so nothing is done).
            host_session_id: OpenClaw's session id.
            path: OpenClaw's store.
            before_seq: Take only entries before this seq (a commit's first entry);
                None: all but the current turn.

        Returns:
            The message entries appended.
        """
        if session.source_seq is None:
            return 0
        entries = self._read(path, host_session_id, session.source_seq)
        if before_seq is not None:
            entries = [(seq, e) for seq, e in entries if seq < before_seq]
        else:
            entries = entries[: _pending_from(entries)]
        if not entries:
            return 0
        appended = 0
        with self.store.atomic():
            for _, entry in entries:
                if entry.get("type") in CONTEXT_TYPES:
                    appended += self._append(session.session_id, entry)
            self.sessions.advance("openclaw", session.session_key, entries[-1][0], path=str(path))
        if appended:
            log.warning(
                "%s: %d entries OpenClaw kept without nexus_store (its legacy engine ran) "
                "were reconciled from %s",
                session.session_key,
                appended,
                path,
            )
        return appended

    def _append(self, session_id: str, entry: dict[str, Any]) -> int:
        """Append one reconciled entry under the active leaf (0: it is already here)."""
        entry_id = entry.get("id")
        if isinstance(entry_id, str) and self.store.find_turn(session_id, entry_id) is not None:
            return 0
        # its parent is an entry of a committed range or a bookkeeping entry, neither
        # kept by id here: the active leaf is where the conversation continues
        entry = {k: v for k, v in entry.items() if k != "parentId"}
        try:
            with self.store.atomic():
                self.store.append_entry(session_id, entry)
        except (InvalidEntry, TurnNotFound) as err:
            # kept, not interpreted (e.g. a legacy compaction whose first kept entry
            # lies inside a committed range): nothing OpenClaw kept is left out
            log.warning("%s: entry %s kept as a custom entry: %s", session_id, entry_id, err)
            self.store.append_entry(
                session_id,
                {"type": "custom", "customType": "openclaw.entry", "data": entry},
            )
        return 1
