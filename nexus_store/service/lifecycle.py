"""OpenClaw's context-engine calls, answered from one `Store` (no HTTP here).

Each method takes the JSON object OpenClaw passes to the engine method of the same
name (``sessionId``, ``sessionKey``, ``messages``, ...; plus the plugin's own
``workspaceDir`` and ``options``) and returns the JSON object OpenClaw expects back, so
the HTTP layer (`nexus_store.service.app`) and the in-process benchmark call the very
same code. Sessions are found by OpenClaw's ``sessionKey`` (its ``sessionId`` when no
key is given) through `EngineSessions`, which persists the mapping.

Where the turns come from: ``commitTurn`` is the durable write (one turn per accepted
OpenClaw turn, once per advancement key). ``ingest`` and ``ingestBatch`` store nothing,
because with ``transcriptSemantics`` declared OpenClaw hands the same messages to
``commitTurn``; storing them twice would duplicate every turn. OpenClaw's own store
(``openclawStore``, the ``openclaw-agent.sqlite`` the plugin names) fills in the rest
(`nexus_store.service.history`): a session that already had history there before
nexus_store was selected is imported once from it, whole and with OpenClaw's ids, and
turns OpenClaw ran on its legacy engine after an engine error are reconciled from it at
the next ``bootstrap`` or ``commitTurn``. Where that store is not found, a session's
earlier history is imported from the ``messages`` OpenClaw passes to the first
``assemble``.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from nexus_store import __version__
from nexus_store.compaction.policy import CompactionConfig
from nexus_store.engine import ContextEngine
from nexus_store.errors import InvalidEntry, NexusError
from nexus_store.service.history import HostHistory
from nexus_store.store import Store
from nexus_store.store.engine_sessions import EngineSession, EngineSessions

__all__ = ["ENGINE_ID", "HOST", "EngineCalls", "RequestError"]

ENGINE_ID = "nexus-store"
HOST = "openclaw"

log = logging.getLogger("nexus_store.service")


class RequestError(NexusError):
    """A request lacks a field or gives one of the wrong type (HTTP 400)."""


def _text(params: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = params.get(name)
    if value is None:
        if required:
            raise RequestError(f"the request needs {name!r} (a string)")
        return None
    if not isinstance(value, str) or not value:
        raise RequestError(f"{name!r} must be a non-empty string, not {value!r}")
    return value


def _messages(params: Mapping[str, Any], name: str = "messages") -> list[dict[str, Any]]:
    value = params.get(name) or []
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise RequestError(f"{name!r} must be a list of message objects")
    return value


def _host_store(params: Mapping[str, Any]) -> Path | None:
    """OpenClaw's store named by the request (``openclawStore``), if it is a file."""
    value = params.get("openclawStore")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise RequestError(f"'openclawStore' must be a path, not {value!r}")
    try:
        return Path(value) if Path(value).is_file() else None
    except OSError:
        return None


def _anchor(params: Mapping[str, Any], name: str) -> tuple[str | None, int] | None:
    """``(entryId, rawSeq)`` of a commit's admission or terminal anchor, if given."""
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RequestError(f"{name!r} must be an object")
    seq = value.get("rawSeq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        return None
    entry = value.get("entryId")
    return (entry if isinstance(entry, str) and entry else None), seq


def _int(params: Mapping[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise RequestError(f"{name!r} must be a non-negative number, not {value!r}")
    return int(value)


class EngineCalls:
    """The context-engine lifecycle of OpenClaw 2026.9.6 over one database.

    Calls are serialized with a lock: the store holds one connection, and SQLite
    allows one writer at a time anyway. Other processes may use the database at once.

    Args:
        store: The open store (the caller closes it).
        summarizer: Compaction summarizer name (``extractive``, the offline default,
            or ``openai``).
    """

    def __init__(self, store: Store, *, summarizer: str = "extractive") -> None:
        self.store = store
        self.summarizer = summarizer
        self.sessions = EngineSessions(store)
        self.history = HostHistory(store, self.sessions)
        self.lock = threading.Lock()

    # -- helpers ------------------------------------------------------------------------

    def _session(self, params: Mapping[str, Any], *, create: bool = True) -> EngineSession:
        session_id = _text(params, "sessionId", required=False)
        key = _text(params, "sessionKey", required=False) or session_id
        if key is None:
            raise RequestError("the request needs 'sessionKey' or 'sessionId'")
        if not create:
            found = self.sessions.find(HOST, key)
            if found is None:
                raise RequestError(f"no session is known for session key {key!r}")
            return found
        cwd = params.get("cwd")
        return self.sessions.ensure(
            HOST, key, session_id, cwd=cwd if isinstance(cwd, str) else None
        )

    def _engine(
        self, params: Mapping[str, Any], *, window_from_budget: bool = False
    ) -> ContextEngine:
        options = params.get("options") or {}
        if not isinstance(options, dict):
            raise RequestError("'options' must be an object")
        config: dict[str, Any] = {}
        for field, name in (
            ("context_window", "contextWindow"),
            ("keep_recent_tokens", "keepRecentTokens"),
            ("reserve_tokens_floor", "reserveTokensFloor"),
            ("soft_threshold_tokens", "softThresholdTokens"),
        ):
            value = _int(options, name)
            if value is not None:
                config[field] = value
        budget = _int(params, "tokenBudget")
        reserve = config.get("reserve_tokens_floor", 20_000) + config.get(
            "soft_threshold_tokens", 4_000
        )
        if window_from_budget and "context_window" not in config and budget and budget > reserve:
            # afterTurn: OpenClaw's budget is the model's window (the trigger formula's input)
            config["context_window"] = budget
        try:
            compaction = CompactionConfig(**config)
        except ValueError as err:
            raise RequestError(f"invalid compaction options: {err}") from None
        summarizer = options.get("summarizer") or self.summarizer
        if summarizer not in ("extractive", "openai"):
            raise RequestError(f"'summarizer' must be 'extractive' or 'openai', not {summarizer!r}")
        workspace = params.get("workspaceDir")
        use_workspace = options.get("systemPromptAddition", "workspace") == "workspace"
        return ContextEngine(
            self.store,
            config=compaction,
            summarizer=summarizer,
            workspace_dir=Path(workspace) if isinstance(workspace, str) and use_workspace else None,
        )

    # -- the lifecycle --------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The engine's ``info`` (transcript semantics included)."""
        return {
            "id": ENGINE_ID,
            "name": "nexus_store",
            "version": __version__,
            "ownsCompaction": True,
            "transcriptSemantics": {
                "currentTurnFence": "before-current-turn-entry-v1",
                "turnAdvancementIdempotency": "atomic-idempotent-v1",
            },
        }

    def bootstrap(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Map the session key to a session (created on first sight) and catch up.

        With OpenClaw's store named (``openclawStore``): a session that holds nothing
        yet imports OpenClaw's history of it; one that does takes the turns OpenClaw
        kept without it (its legacy engine ran after an engine error).
        """
        with self.lock:
            known = self.sessions.find(
                HOST, str(params.get("sessionKey") or params.get("sessionId") or "")
            )
            session = self._session(params)
            imported, reconciled = self._catch_up(session, params)
        result: dict[str, Any] = {"bootstrapped": True, "importedMessages": imported}
        if known is not None and known.session_id == session.session_id:
            result = {"bootstrapped": False, "reason": f"already kept as {session.session_id}"}
        if reconciled:
            result["reconciledEntries"] = reconciled
        return result

    def _catch_up(self, session: EngineSession, params: Mapping[str, Any]) -> tuple[int, int]:
        """``(imported, reconciled)`` entries from OpenClaw's store (0, 0 without it).

        Errors reading it are logged and leave the session as it was: OpenClaw's
        store stays the whole record, and the next call tries again.
        """
        path = _host_store(params)
        host_id = _text(params, "sessionId", required=False)
        if path is None or host_id is None or session.host_session_id != host_id:
            return 0, 0
        has_turns, parent, _ = self.sessions.shape(session.session_id)
        try:
            if not has_turns and not self.sessions.commits(session.session_id):
                # a forked child reads its parent's path by reference: nothing to import
                if parent is None:
                    return self.history.import_session(session, host_id, path), 0
                return 0, 0
            return 0, self.history.reconcile(session, host_id, path)
        except NexusError as err:
            log.warning("%s: OpenClaw's store %s was not read: %s", session.session_key, path, err)
            return 0, 0

    def ingest(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Acknowledge one message; the turn is stored by ``commitTurn`` (see the module)."""
        if not isinstance(params.get("message"), dict):
            raise RequestError("'message' must be a message object")
        return {"ingested": False}

    def ingest_batch(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Acknowledge a batch; the turn is stored by ``commitTurn`` (see the module)."""
        _messages(params)
        return {"ingestedCount": 0}

    def commit_turn(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Store one accepted turn, once per ``advancementKey``."""
        key = _text(params, "advancementKey")
        assert key is not None
        messages = _messages(params)
        admission, terminal = _anchor(params, "admission"), _anchor(params, "terminal")
        with self.lock:
            session = self._session(params)
            seq = stored = None
            host_id = _text(params, "sessionId", required=False)
            if admission and terminal and host_id and session.host_session_id == host_id:
                seq = terminal[1]
                stored = self._before_commit(session, host_id, admission, terminal, params)
            outcome = self.sessions.commit_turn(
                HOST,
                key,
                session.session_id,
                messages,
                session_key=session.session_key,
                source_seq=seq,
                stored_turn=stored,
            )
        return {
            "status": outcome.status,
            "sessionId": outcome.session_id,
            "turnId": outcome.turn_id,
        }

    def _before_commit(
        self,
        session: EngineSession,
        host_id: str,
        admission: tuple[str | None, int],
        terminal: tuple[str | None, int],
        params: Mapping[str, Any],
    ) -> str | None:
        """Reconcile what OpenClaw kept before this turn; the turn's id if it is here.

        A turn whose first entry was reconciled already (its commit failed, then the
        next bootstrap took it from OpenClaw's store, then OpenClaw's outbox retried
        the commit) is not written again: the id of its stored turn is returned.
        """
        path = _host_store(params)
        start = session.source_seq
        if path is not None and start is not None and admission[1] > start + 1:
            try:
                self.history.reconcile(session, host_id, path, before_seq=admission[1])
            except NexusError as err:
                log.warning(
                    "%s: OpenClaw's store %s was not read: %s", session.session_key, path, err
                )
        if not admission[0] or self.store.find_turn(session.session_id, admission[0]) is None:
            return None
        fresh = self.sessions.find(HOST, session.session_key)
        if path is not None and fresh is not None:
            try:  # the rest of the turn's range, if the reconciliation took only its start
                self.history.reconcile(fresh, host_id, path, before_seq=terminal[1] + 1)
            except NexusError as err:
                log.warning(
                    "%s: OpenClaw's store %s was not read: %s", session.session_key, path, err
                )
        if terminal[0] and self.store.find_turn(session.session_id, terminal[0]) is not None:
            return terminal[0]
        return admission[0]

    def assemble(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The model context within ``tokenBudget``, from the database."""
        host_messages = _messages(params)
        with self.lock:
            session = self._session(params)
            engine = self._engine(params)
            has_turns, parent, fork = self.sessions.shape(session.session_id)
            if not has_turns and not parent and self._catch_up(session, params)[0]:
                has_turns = True  # imported from OpenClaw's store
            if not has_turns and "messages" not in params:
                if not self.sessions.commits(session.session_id):
                    # a session never seen: ask for OpenClaw's history once, to import it
                    return {"needsHistory": True}
            imported = self._import_once(session, host_messages) if not has_turns else 0
            if imported:
                has_turns = True
            if not has_turns and parent and fork:
                # a forked child before its first turn: the parent's path, not copied
                ctx = self.store.context(parent, fork)
                messages = [m for m in ctx.messages if isinstance(m, dict)]
                result = {
                    "messages": messages,
                    "estimatedTokens": ctx.tokens,
                }
                addition = engine.assemble(session.session_id).system_prompt_addition
            else:
                assembled = engine.assemble(
                    session.session_id, token_budget=_int(params, "tokenBudget")
                )
                result = {
                    "messages": assembled.messages,
                    "estimatedTokens": assembled.estimated_tokens,
                }
                addition = assembled.system_prompt_addition
        if addition:
            result["systemPromptAddition"] = addition
        if imported:
            result["importedMessages"] = imported
        return result

    def _import_once(self, session: EngineSession, host_messages: list[dict[str, Any]]) -> int:
        """Import OpenClaw's own history into a session that has none yet.

        A forked child keeps its parent's path by reference; only what OpenClaw's
        fork carries beyond the parent's stored leaf (the parent's turn in progress,
        not committed yet) is stored, as the child's first turn.
        """
        if not host_messages:
            return 0
        stored = self.store.get_session(session.session_id)
        if stored.turn_count or self.sessions.commits(session.session_id):
            return 0
        messages = host_messages
        if stored.parent_session and stored.fork_turn:
            parent = self.store.context(stored.parent_session, stored.fork_turn).messages
            last = parent[-1] if parent else None
            at = max((i for i, m in enumerate(host_messages) if m == last), default=None)
            # without the parent's leaf among them, nothing tells what is new: keep none
            messages = [] if at is None else host_messages[at + 1 :]
        if messages:
            self.store.append_messages(session.session_id, messages)
        return len(messages)

    def after_turn(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Proactive compaction when the trigger formula fires (no message is stored)."""
        with self.lock:
            session = self._session(params)
            engine = self._engine(params, window_from_budget=True)
            if params.get("isHeartbeat") or _int(params, "tokenBudget") is None:
                return {"compacted": False}
            result = engine.after_turn(session.session_id)
        compaction = result.compaction
        return {
            "compacted": bool(compaction and compaction.compacted),
            "tokens": result.tokens,
            "risk": result.risk,
            **({"warning": result.warning} if result.warning else {}),
        }

    def compact(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """nexus_store's compaction: a summary turn; nothing is deleted."""
        instructions = params.get("customInstructions")
        with self.lock:
            session = self._session(params)
            engine = self._engine(params)
            outcome = engine.compact(
                session.session_id,
                force=bool(params.get("force")),
                custom_instructions=instructions if isinstance(instructions, str) else None,
            )
            summary = None
            if outcome.turn_id is not None:
                summary = self.store.get_turn(session.session_id, outcome.turn_id).entry.get(
                    "summary"
                )
        result: dict[str, Any] = {"ok": outcome.ok, "compacted": outcome.compacted}
        if outcome.reason:
            result["reason"] = outcome.reason
        if outcome.compacted:
            result["result"] = {
                "summary": summary,
                "tokensBefore": outcome.tokens_before or 0,
                "tokensAfter": outcome.tokens_after,
                "details": {"turnId": outcome.turn_id, "layer": outcome.layer},
            }
        return result

    def prepare_subagent_spawn(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A child session: ``fork`` continues the parent's path, ``isolated`` is empty."""
        parent_key = _text(params, "parentSessionKey")
        child_key = _text(params, "childSessionKey")
        assert parent_key is not None and child_key is not None
        mode = params.get("contextMode") or "isolated"
        if mode not in ("isolated", "fork"):
            raise RequestError(f"'contextMode' must be 'isolated' or 'fork', not {mode!r}")
        child_host_id = _text(params, "childSessionId", required=False)
        context_mode: Literal["isolated", "fork"] = "fork" if mode == "fork" else "isolated"
        with self.lock, self.store.atomic():
            parent = self.sessions.ensure(
                HOST, parent_key, _text(params, "parentSessionId", required=False)
            )
            existing = self.sessions.find(HOST, child_key)
            if existing is not None:
                return {"childSessionId": existing.session_id, "created": False}
            wanted = (
                child_host_id
                if child_host_id and not self.store.find_session(child_host_id)
                else None
            )
            prepared = ContextEngine(self.store).prepare_subagent_spawn(
                parent.session_id, context_mode=context_mode, child_session_id=wanted
            )
            self.store.set_title(prepared.child_session_id, child_key)
            self.sessions.link(
                HOST,
                child_key,
                prepared.child_session_id,
                host_session_id=child_host_id,
                parent_key=parent_key,
                context_mode=context_mode,
            )
        return {
            "childSessionId": prepared.child_session_id,
            "forkTurnId": prepared.fork_turn_id,
            "created": True,
        }

    def rollback_subagent_spawn(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Undo a spawn that failed: the child's session goes if it has no turns."""
        child_key = _text(params, "childSessionKey")
        assert child_key is not None
        with self.lock:
            found = self.sessions.find(HOST, child_key)
            if found is None:
                return {"rolledBack": False, "reason": f"no session for {child_key!r}"}
            removed = self.store.delete_session_if_empty(found.session_id)
        return {"rolledBack": removed}

    def on_subagent_ended(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Record the end on the child's mapping and in the parent session."""
        child_key = _text(params, "childSessionKey")
        assert child_key is not None
        reason = params.get("reason") or "completed"
        if not isinstance(reason, str):
            raise RequestError(f"'reason' must be a string, not {reason!r}")
        with self.lock:
            found = self.sessions.end(HOST, child_key, reason)
            if found is None:
                return {"recorded": False}
            try:
                turn = ContextEngine(self.store).on_subagent_ended(found.session_id, reason=reason)
            except InvalidEntry:
                turn = None
        return {"recorded": True, "turnId": None if turn is None else turn.id}

    def session_of(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Which session a key maps to (for tools and tests)."""
        with self.lock:
            found = self._session(params, create=False)
        return {
            "sessionKey": found.session_key,
            "sessionId": found.session_id,
            "hostSessionId": found.host_session_id,
            "parentKey": found.parent_key,
            "contextMode": found.context_mode,
            "endedReason": found.ended_reason,
            "commits": self.sessions.commits(found.session_id),
        }
