"""`NexusAdvancedSession`: the SDK's ``AdvancedSQLiteSession`` API on the turn tree.

A branch is a name pointing at a leaf of the session's tree (table ``agent_branches``).
Creating one from a user turn points the new name at that turn's parent: nothing is
copied, the branches share their common turns. Appending moves the current branch's
tip; popping moves it back (the popped turn stays in the tree); deleting a branch
forgets its name (which stays reserved, as in the SDK) and keeps its turns.

User-turn numbers, the conversation by turns and tool usage are SQL queries over the
branch's path (each turn carries its item type and tool name in ``agent_items``).
``store_run_usage`` records the Runner's usage for the branch's latest user turn in
``agent_usage`` (requests, input/output/cache-read/reasoning/total tokens, details).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

from nexus_store.openai_agents.session import NexusSession
from nexus_store.store import Store
from nexus_store.store.db import utc_now

__all__ = ["NexusAdvancedSession"]

MAIN = "main"


class NexusAdvancedSession(NexusSession):
    """A `NexusSession` with ``AdvancedSQLiteSession``'s branches, turns and usage.

    Example:
        >>> import asyncio
        >>> from nexus_store.openai_agents import NexusAdvancedSession
        >>> s = NexusAdvancedSession(session_id="chat")
        >>> asyncio.run(s.add_items([{"role": "user", "content": "a"},
        ...                          {"role": "assistant", "content": "b"},
        ...                          {"role": "user", "content": "c"}]))
        >>> asyncio.run(s.create_branch_from_turn(2, "retry"))
        'retry'
        >>> asyncio.run(s.get_items())
        [{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'}]
        >>> s.close()

    Args:
        session_id: The conversation's id.
        db_path: The database file, ``":memory:"``, or a ``postgresql://`` URL.
        create_tables: Accepted for compatibility; the tables come with the schema.
        logger: Where failures of ``store_run_usage`` are logged.
        session_settings: As for `NexusSession`.
        store: An open `Store` to use instead of ``db_path``.
        cwd: Working directory recorded on a new session.
        title: Title recorded on a new session.
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        *,
        create_tables: bool = False,
        logger: logging.Logger | None = None,
        session_settings: Any = None,
        store: Store | None = None,
        cwd: str | None = None,
        title: str | None = None,
    ) -> None:
        del create_tables  # the schema has the tables
        super().__init__(
            session_id,
            db_path,
            store=store,
            session_settings=session_settings,
            cwd=cwd,
            title=title,
        )
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._branch = MAIN
        with self._lock, self.store.atomic():
            key, leaf = self._session_key(), super()._leaf()
            self._sql.add_branch(key, MAIN, leaf, None, utc_now())

    @property
    def _current_branch_id(self) -> str:
        """The branch new items go to (``"main"`` at first)."""
        return self._branch

    # -- the tip of the current branch is the leaf ---------------------------------------

    def _session_key(self) -> int:
        row = self._sql.session_row(self.session_id)
        assert row is not None
        return row[0]

    def _tip(self, name: str) -> tuple[bool, int | None]:
        """Whether a branch is live, and its tip."""
        row = self._sql.branch(self._session_key(), name)
        if row is None or row[1]:
            return False, None
        return True, row[0]

    def _leaf(self) -> int | None:
        live, tip = self._tip(self._branch)
        if not live:  # deleted by a clear_session elsewhere: back to main, as the SDK
            self._branch = MAIN
            tip = self._tip(MAIN)[1]
        return tip

    def _set_leaf(self, leaf: int | None) -> None:
        self._sql.set_tip(self._session_key(), self._branch, leaf)
        super()._set_leaf(leaf)

    def _appended(self, tip: int | None) -> None:
        self._sql.set_tip(self._session_key(), self._branch, tip)

    def _branch_leaf(self, branch_id: str | None) -> int | None:
        if branch_id is None:
            return self._leaf()
        return self._tip(branch_id)[1]

    # -- the SDK protocol, per branch ----------------------------------------------------

    async def get_items(self, limit: int | None = None, branch_id: str | None = None) -> list[Any]:
        """The items of the current branch, or of ``branch_id`` (see `NexusSession`)."""
        self._check_open()
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        return await asyncio.to_thread(self._branch_items_sync, limit, branch_id)

    def _branch_items_sync(self, limit: int | None, branch_id: str | None) -> list[Any]:
        with self._lock:
            self._check_open()
            return self._read(self._branch_leaf(branch_id), limit)[0]

    def _pop_sync(self, validate: Any) -> Any | None:
        with self._lock, self.store.atomic():
            self._check_open()
            popped = self._pop_from(self._leaf(), validate)
            if popped is None:
                return None
            item, new_leaf, turn_key = popped
            self._set_leaf(new_leaf)
            # A turn's usage goes with its user item, as AdvancedSQLiteSession drops it.
            self._sql.drop_usage(self._session_key(), self._branch, turn_key)
            return item

    def _clear_sync(self) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            self._sql.reset(self._session_key(), MAIN, utc_now())
            self._branch = MAIN
            NexusSession._set_leaf(self, None)

    # -- branches ------------------------------------------------------------------------

    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Start a branch just before the user message of a turn, and switch to it.

        Nothing is copied: the branch is a name for that turn's parent.

        Args:
            turn_number: The user-turn number (1 for the first user message).
            branch_name: The new branch's id; generated when None. A name used
                before in this session (even of a deleted branch) is refused.

        Returns:
            The branch id.

        Raises:
            ValueError: If the name is blank or used, or the turn has no user message.
        """
        if branch_name is not None and not branch_name.strip():
            raise ValueError("Branch name cannot be empty")
        self._check_open()
        name, source, content = await asyncio.to_thread(
            self._create_branch_sync, turn_number, branch_name
        )
        # AdvancedSQLiteSession's debug line; the turn's text only where the SDK's policy
        # (OPENAI_AGENTS_DONT_LOG_MODEL_DATA) allows model data in logs.
        if _dont_log_model_data():
            self._logger.debug(
                "Created branch '%s' from turn %s in '%s'", name, turn_number, source
            )
        else:
            self._logger.debug(
                "Created branch '%s' from turn %s ('%s') in '%s'",
                name,
                turn_number,
                content,
                source,
            )
        return name

    def _create_branch_sync(
        self, turn_number: int, branch_name: str | None
    ) -> tuple[str, str, Any]:
        """Name the branch and switch to it: its name, the source branch, a log preview."""
        with self._lock, self.store.atomic():
            self._check_open()
            turn = next(
                (u for u in self._sql.user_turns(self._leaf()) if u[1] == turn_number), None
            )
            if turn is None:
                raise ValueError(
                    f"Turn {turn_number} does not contain a user message in branch '{self._branch}'"
                )
            key, now = self._session_key(), utc_now()
            base = self._sql.parent_key(turn[0])
            if branch_name is not None:
                if not self._sql.add_branch(key, branch_name, base, base, now):
                    raise ValueError(
                        f"Branch ID '{branch_name}' has already been used. Choose a new branch ID."
                    )
                name = branch_name
            else:
                stem = f"branch_from_turn_{turn_number}_{int(time.time())}"
                name, suffix = stem, 1
                while not self._sql.add_branch(key, name, base, base, now):
                    suffix += 1
                    name = f"{stem}_{suffix}"
            source, self._branch = self._branch, name
            NexusSession._set_leaf(self, base)
            return name, source, self._turn_preview(turn[0])

    def _turn_preview(self, turn_key: int) -> Any:
        """A user turn's content for the branch log: its first 50 characters, as the SDK."""
        messages = self._sql.messages_of([turn_key]).get(turn_key, [])
        items = self._expand(messages, [""] * len(messages))[0]
        content = items[-1].get("content", "") if items else ""
        return content[:50] + "..." if len(content) > 50 else content

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """Branch from the first user turn whose text contains ``search_term``.

        Raises:
            ValueError: If no user turn matches, or as `create_branch_from_turn`.
        """
        matches = await self.find_turns_by_content(search_term)
        if not matches:
            raise ValueError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(matches[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Make a branch current.

        Raises:
            ValueError: If the branch does not exist (or has no items).
        """
        self._check_open()
        await asyncio.to_thread(self._switch_sync, branch_id)

    def _switch_sync(self, branch_id: str) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            live, tip = self._tip(branch_id)
            if not live or tip is None:
                raise ValueError(f"Branch '{branch_id}' does not exist")
            old, self._branch = self._branch, branch_id
            NexusSession._set_leaf(self, tip)
        self._logger.info("Switched from branch '%s' to '%s'", old, branch_id)

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Forget a branch's name (it stays reserved) and usage; its turns stay in the tree.

        Args:
            branch_id: The branch.
            force: Allow deleting the current branch (the session switches to main).

        Raises:
            ValueError: If the branch is blank, ``main``, unknown, or current without force.
        """
        if not branch_id or not branch_id.strip():
            raise ValueError("Branch ID cannot be empty")
        if branch_id == MAIN:
            raise ValueError("Cannot delete the 'main' branch")
        if branch_id == self._branch and not force:
            raise ValueError(
                f"Cannot delete current branch '{branch_id}'. "
                "Use force=True or switch branches first"
            )
        self._check_open()
        await asyncio.to_thread(self._delete_sync, branch_id)

    def _delete_sync(self, branch_id: str) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            live, tip = self._tip(branch_id)
            if not live or tip is None:
                raise ValueError(f"Branch '{branch_id}' does not exist")
            if branch_id == self._branch:
                self._branch = MAIN
                NexusSession._set_leaf(self, self._tip(MAIN)[1])
            self._sql.delete_branch(self._session_key(), branch_id, utc_now())

    async def list_branches(self) -> list[dict[str, Any]]:
        """The branches that hold items, oldest first.

        Returns:
            Dicts with ``branch_id``, ``message_count``, ``user_turns``,
            ``is_current`` and ``created_at``.
        """
        self._check_open()
        return await asyncio.to_thread(self._list_sync)

    def _list_sync(self) -> list[dict[str, Any]]:
        with self._lock:
            self._check_open()
            current = self._leaf() and self._branch
            branches = []
            for name, tip, created in self._sql.live_branches(self._session_key()):
                count, users = self._sql.path_counts(tip)
                if not count:
                    continue
                branches.append(
                    {
                        "branch_id": name,
                        "message_count": count,
                        "user_turns": users,
                        "is_current": name == (current or self._branch),
                        "created_at": created,
                    }
                )
            return branches

    # -- turns ---------------------------------------------------------------------------

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (current by default), for browsing and branching.

        Returns:
            Dicts with ``turn``, ``content`` (at most 100 characters), ``full_content``,
            ``timestamp`` and ``can_branch``.
        """
        self._check_open()
        return await asyncio.to_thread(self._turns_sync, branch_id, None)

    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns whose text contains ``search_term`` (ASCII case ignored).

        Returns:
            Dicts as `get_conversation_turns` gives, with the whole content.
        """
        self._check_open()
        return await asyncio.to_thread(self._turns_sync, branch_id, search_term)

    def _turns_sync(self, branch_id: str | None, term: str | None) -> list[dict[str, Any]]:
        with self._lock:
            self._check_open()
            leaf = self._branch_leaf(branch_id)
            # With a term, SQL narrows the user turns to those whose text may hold it
            # and only those are read; the exact rule (AdvancedSQLiteSession's: an
            # ASCII-case-insensitive substring of one text part) is checked here.
            users = self._sql.user_turns(leaf, term)
            messages = self._sql.messages_of([u[0] for u in users])
            pattern = None if term is None else re.compile(re.escape(term), re.I | re.ASCII)
            turns = []
            for key, number, created in users:
                expanded = self._expand(messages.get(key, []), [""] * len(messages.get(key, [])))
                content = expanded[0][-1].get("content", "") if expanded[0] else ""
                if pattern is not None:
                    texts = (
                        [content]
                        if isinstance(content, str)
                        else [p.get("text", "") for p in content if isinstance(p, dict)]
                    )
                    if not any(pattern.search(str(text)) for text in texts):
                        continue
                turns.append(
                    {
                        "turn": number,
                        "content": _preview(content, 100 if term is None else None),
                        "full_content": content,
                        "timestamp": created,
                        "can_branch": True,
                    }
                )
            return turns

    async def get_conversation_by_turns(
        self, branch_id: str | None = None
    ) -> dict[int, list[dict[str, str | None]]]:
        """Each user turn's items (``type``, ``tool_name``), in order, by turn number."""
        self._check_open()
        return await asyncio.to_thread(self._by_turns_sync, branch_id)

    def _by_turns_sync(self, branch_id: str | None) -> dict[int, list[dict[str, str | None]]]:
        with self._lock:
            self._check_open()
            turns: dict[int, list[dict[str, str | None]]] = {}
            for _, _, _, kind, tool, number in self._sql.path_items(self._branch_leaf(branch_id)):
                turns.setdefault(number, []).append({"type": kind, "tool_name": tool})
            return turns

    async def get_tool_usage(self, branch_id: str | None = None) -> list[tuple[str, int, int]]:
        """``(tool name, uses, user turn)`` for the branch's tool calls (one SQL query)."""
        self._check_open()
        return await asyncio.to_thread(self._tool_usage_sync, branch_id)

    def _tool_usage_sync(self, branch_id: str | None) -> list[tuple[str, int, int]]:
        with self._lock:
            self._check_open()
            return self._sql.tool_usage(self._branch_leaf(branch_id))

    # -- usage ---------------------------------------------------------------------------

    async def store_run_usage(self, result: Any) -> None:
        """Record a Runner result's usage for the current branch's latest user turn.

        Failures are logged, not raised (as ``AdvancedSQLiteSession``).

        Args:
            result: A ``RunResult`` (its ``context_wrapper.usage``).
        """
        try:
            usage = result.context_wrapper.usage
            if usage is None:
                return
            self._check_open()
            await asyncio.to_thread(self._store_usage_sync, usage)
        except Exception as err:
            self._logger.error("Failed to store session usage: %s", err)

    def _store_usage_sync(self, usage: Any) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            user = self._sql.last_user(self._leaf())
            if user is None:
                return
            inputs = _details(getattr(usage, "input_tokens_details", None))
            outputs = _details(getattr(usage, "output_tokens_details", None))
            values = [
                utc_now(),
                usage.requests or 0,
                usage.input_tokens or 0,
                usage.output_tokens or 0,
                None if inputs is None else inputs.get("cached_tokens"),
                None if outputs is None else outputs.get("reasoning_tokens"),
                usage.total_tokens or 0,
                None if inputs is None else json.dumps(inputs),
                None if outputs is None else json.dumps(outputs),
            ]
            self._sql.put_usage(self._session_key(), self._branch, user, values)

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """Summed usage of one branch, or of all branches; None when nothing was recorded.

        Returns:
            ``requests``, ``input_tokens``, ``output_tokens``, ``total_tokens`` and
            ``total_turns``.
        """
        self._check_open()
        return await asyncio.to_thread(self._session_usage_sync, branch_id)

    def _session_usage_sync(self, branch_id: str | None) -> dict[str, int] | None:
        with self._lock:
            self._check_open()
            row = self._sql.session_usage(self._session_key(), branch_id or None)
            if row[0] is None:
                return None
            keys = ("requests", "input_tokens", "output_tokens", "total_tokens", "total_turns")
            return {k: int(v or 0) for k, v in zip(keys, row, strict=True)}

    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """Usage by user turn of a branch (current by default), details included.

        Returns:
            The dict of one turn (empty if none was recorded), or a list for all turns.
        """
        self._check_open()
        return await asyncio.to_thread(self._turn_usage_sync, user_turn_number, branch_id)

    def _turn_usage_sync(
        self, number: int | None, branch_id: str | None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        with self._lock:
            self._check_open()
            # The leaf first: reading it puts a stale instance (its branch deleted by
            # another instance's clear_session) back on main, whose usage is then read.
            leaf = self._branch_leaf(branch_id)
            branch = self._branch if branch_id is None else branch_id
            rows = self._sql.turn_usage(self._session_key(), branch, leaf)
            found = [
                {
                    "user_turn_number": r[0],
                    "requests": r[1],
                    "input_tokens": r[2],
                    "output_tokens": r[3],
                    "total_tokens": r[4],
                    "input_tokens_details": None if r[5] is None else json.loads(r[5]),
                    "output_tokens_details": None if r[6] is None else json.loads(r[6]),
                }
                for r in rows
            ]
            if number is None:
                return found
            for row in found:
                if row["user_turn_number"] == number:
                    return {k: v for k, v in row.items() if k != "user_turn_number"}
            return {}


def _dont_log_model_data() -> bool:
    """The SDK's policy on model data in logs (True, the safe side, without the SDK)."""
    try:
        from agents import _debug
    except ImportError:
        return True
    return bool(_debug.DONT_LOG_MODEL_DATA)


def _details(value: Any) -> dict[str, Any] | None:
    """Token details as a dict (None when absent or empty, as the SDK stores them)."""
    if not value:
        return None
    if hasattr(value, "model_dump"):
        dumped: dict[str, Any] = value.model_dump()
        return dumped
    return dict(vars(value)) if hasattr(value, "__dict__") else None


def _preview(content: Any, limit: int | None) -> str:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return text[:limit] + "..." if limit is not None and len(text) > limit else text
