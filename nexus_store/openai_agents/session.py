"""`NexusSession`: the OpenAI Agents SDK's ``SQLiteSession``, on nexus_store's turn tree.

`NexusSession` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, async ``get_items``, ``add_items``, ``pop_item``,
``clear_session``) and behaves as ``SQLiteSession`` does where the SDK's tests look:
default settings, limits (a negative limit reads everything), ``RuntimeError`` after
``close()``, ``TypeError`` for an item JSON cannot hold. Each item is one ``message``
turn, the child of the session's active leaf (see `nexus_store.openai_agents.items`).

History is never deleted: ``pop_item`` moves the active leaf back to before the last
item's turn, and ``clear_session`` moves it before the first turn, so the next item
starts a new branch. ``get_items`` returns the context of the active leaf, so once a
compaction is on the path, the items before it are replaced by its summary. Reading the
last N items walks N turns back from the leaf (O(N), not O(history)).

The SDK's wrappers find what they need here: ``_get_compaction_snapshot`` (the atomic
suffix replacement ``OpenAIResponsesCompactionSession`` uses for automatic compaction:
the replaced items stay in the tree, on the old branch), and
``_pop_item_with_validation`` (``EncryptedSession`` checks an item's key before it is
removed). When the SDK is installed, `NexusSession` is
registered as a virtual subclass of ``SQLiteSession`` and shares its ``pop_item``, which
is how those wrappers recognise a session with these guarantees.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from nexus_store.openai_agents.items import classify, item_to_message, message_to_items
from nexus_store.store import Store
from nexus_store.store.agent_sessions import AgentSessions

__all__ = ["NexusSession"]

_Validate = Callable[[Any], None]
_T = TypeVar("_T")


class NexusSession:
    """An OpenAI Agents SDK session stored in a nexus_store database.

    Example:
        >>> import asyncio
        >>> from nexus_store.openai_agents import NexusSession
        >>> session = NexusSession("chat-1", ":memory:")
        >>> asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
        >>> asyncio.run(session.get_items())
        [{'role': 'user', 'content': 'hi'}]
        >>> session.close()

    Args:
        session_id: The conversation's id; the nexus_store session of the same id is
            used, or created.
        db_path: The database file (created if missing), ``":memory:"``, or a
            ``postgresql://`` URL.
        store: An open `Store` to use instead of ``db_path`` (not closed by `close`).
        session_settings: The SDK's ``SessionSettings`` (e.g. a default ``limit``
            for ``get_items``) or a dict of its fields; default ``SessionSettings()``.
        cwd: Working directory recorded on a new session.
        title: Title recorded on a new session.

    Raises:
        StoreOpenError: If the database cannot be opened.
        TypeError: If ``session_settings`` has a key ``SessionSettings`` does not know.
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        *,
        store: Store | None = None,
        session_settings: Any = None,
        cwd: str | None = None,
        title: str | None = None,
    ) -> None:
        _register_with_sdk()
        self.session_id = session_id
        self.session_settings = _coerce_settings(session_settings)
        self._closed = False
        self._owns_store = store is None
        if store is not None:
            self.store = store
        elif str(db_path) == ":memory:":
            self.store = Store(memory=True)
        else:
            self.store = Store(db_path)
        self._lock = threading.RLock()
        self._tool_names: dict[str, str] = {}
        self._sql = AgentSessions(self.store)
        try:
            if self.store.find_session(session_id) is None:
                self.store.create_session(id=session_id, cwd=cwd, title=title)
        except BaseException:
            self.close()
            raise

    # -- the SDK protocol ------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """Return the conversation's items, oldest first (the latest ``limit`` of them).

        Args:
            limit: At most this many items, the most recent; None uses
                ``session_settings.limit`` (all items when that is None too). A
                negative limit returns all items and 0 none, as ``SQLiteSession``.

        Returns:
            The items of the active branch's context, exactly as they were added.

        Raises:
            RuntimeError: If the session is closed.
        """
        self._check_open()
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        return await asyncio.to_thread(self._get_items_sync, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append items to the conversation, each as one turn, in one transaction.

        Args:
            items: Responses-API input items.

        Raises:
            RuntimeError: If the session is closed.
            TypeError: If an item is not a JSON object (nothing is written).
        """
        self._check_open()
        if items:
            await _settled(asyncio.to_thread(self._add_items_sync, list(items)))

    async def pop_item(self) -> Any | None:
        """Remove the most recent item from the conversation and return it.

        Nothing is deleted: the active leaf moves back to before the item's turn, so
        the next item starts a new branch there.

        Returns:
            The item, or None when the conversation is empty.

        Raises:
            RuntimeError: If the session is closed.
        """
        return await self._pop_item_with_validation()

    async def clear_session(self) -> None:
        """Start the conversation over: the active leaf moves before the first turn.

        The old branch stays in the database (see ``nexus-store tree``).

        Raises:
            RuntimeError: If the session is closed.
        """
        self._check_open()
        await _settled(asyncio.to_thread(self._clear_sync))

    # -- nexus_store ---------------------------------------------------------------------

    async def compact(self, **options: Any) -> Any:
        """Compact the conversation with nexus_store: a compaction turn, history kept.

        The older items are summarized into a compaction turn written after the last
        item; `get_items` then returns the summary (as a user message) followed by the
        items kept verbatim, and the items before stay in the tree.

        Args:
            **options: Passed to `Store.compact` (``summarizer``, ``config``,
                ``keep_recent_tokens``, ``instructions``, ``layer``, ``dry_run``...).

        Returns:
            The `CompactResult`.
        """
        self._check_open()
        return await asyncio.to_thread(self._compact_sync, options)

    def close(self) -> None:
        """Close the database if this session opened it; later calls raise RuntimeError."""
        with self._lock:
            self._closed = True
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> NexusSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the SDK's wrappers call ----------------------------------------------------

    async def _pop_item_with_validation(self, validate: _Validate | None = None) -> Any | None:
        """Pop the last item once ``validate`` accepts it (an exception changes nothing)."""
        self._check_open()
        return await _settled(asyncio.to_thread(self._pop_sync, validate))

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> Any:
        """The last ``limit`` items with an atomic replacement of a suffix of them.

        ``OpenAIResponsesCompactionSession`` compacts through this. Replacing moves the
        leaf to before the suffix and appends the output there: the replaced items stay
        in the tree, on the old branch. When ``prune_prefix`` (expired encrypted items,
        from ``EncryptedSession``) holds for the oldest items, the conversation restarts
        from a new root without them (the items after them are appended again there);
        the old path, expired items included, stays in the tree.
        """
        from agents.memory.session import _CompactionSnapshot

        if (
            type(self).get_items is not NexusSession.get_items
            or type(self).add_items is not NexusSession.add_items
        ):
            # As SQLiteSession: a subclass that transforms reads or writes must supply
            # its own snapshot rather than inherit a bypass of them.
            return None
        self._check_open()
        items, uids, complete = await asyncio.to_thread(self._snapshot_sync, limit)

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            expected = uids[start:]
            if not expected:
                return False
            return await _settled(
                asyncio.to_thread(self._replace_suffix_sync, expected, output, prune_prefix)
            )

        return _CompactionSnapshot(items, complete, replace_suffix)

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _leaf(self) -> int | None:
        """The key of the turn new items go under (the active leaf here)."""
        row = self._sql.session_row(self.session_id)
        return None if row is None else row[1]

    def _set_leaf(self, leaf: int | None) -> None:
        self._sql.set_active_leaf(self.session_id, leaf)

    def _appended(self, tip: int | None) -> None:
        """After an append under the leaf: the store's active leaf already moved."""

    def _read(self, leaf: int | None, limit: int | None) -> tuple[list[Any], list[str], bool]:
        """A leaf's items (the last ``limit`` if positive), their turn ids, and if that is all."""
        if leaf is None:
            return [], [], True
        if limit is not None and limit > 0:
            tail = self._sql.tail(leaf, limit)
            if tail is not None:
                messages, uids, _, complete = tail
                items, item_uids = self._expand(messages, uids)
                return items[-limit:], item_uids[-limit:], complete and len(items) <= limit
        context = self.store.context(self.session_id, self._sql.turn_uid(leaf))
        items, item_uids = self._expand(context.messages, context.turn_ids)
        if limit is not None and limit > 0:
            return items[-limit:], item_uids[-limit:], len(items) <= limit
        if limit == 0:
            return [], [], not items
        return items, item_uids, True

    def _expand(self, messages: list[Any], uids: list[str]) -> tuple[list[Any], list[str]]:
        items: list[Any] = []
        item_uids: list[str] = []
        for message, uid in zip(messages, uids, strict=True):
            for item in message_to_items(message):
                self._remember_tool(item)
                items.append(item)
                item_uids.append(uid)
        return items, item_uids

    def _get_items_sync(self, limit: int | None) -> list[Any]:
        with self._lock:
            self._check_open()
            return self._read(self._leaf(), limit)[0]

    def _append(self, items: list[Any], parent: int | None) -> int | None:
        """Append items under ``parent`` (inside a transaction); return the new tip's key."""
        messages = []
        for item in items:
            self._remember_tool(item)
            messages.append(item_to_message(item, self._tool_names))
        row = self._sql.session_row(self.session_id)
        assert row is not None
        session_key, _, last_seq = row
        parent_uid = self._sql.turn_uid(parent)
        for message in messages:
            turn = self.store.append_message(self.session_id, message, parent_id=parent_uid)
            parent_uid = turn.id
        new = self._sql.turns_after(session_key, last_seq)
        self._sql.record_items(
            [(key, *classify(item)) for (key, _), item in zip(new, items, strict=True)]
        )
        return new[-1][0] if new else parent

    def _add_items_sync(self, items: list[Any]) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            self._appended(self._append(items, self._leaf()))

    def _pop_sync(self, validate: _Validate | None) -> Any | None:
        with self._lock, self.store.atomic():
            self._check_open()
            leaf = self._leaf()
            popped = self._pop_from(leaf, validate)
            if popped is None:
                return None
            item, new_leaf, _ = popped
            self._set_leaf(new_leaf)
            return item

    def _pop_from(
        self, leaf: int | None, validate: _Validate | None
    ) -> tuple[Any, int | None, int] | None:
        """The last item of a leaf's context, the leaf without it, and its turn's key."""
        if leaf is None:
            return None
        tail = self._sql.tail(leaf, 1)
        if tail is not None:
            messages, uids, keys, _ = tail
            is_message = True  # a tail holds message turns only
        else:
            context = self.store.context(self.session_id, self._sql.turn_uid(leaf))
            if not context.messages:
                return None
            messages, uids = context.messages[-1:], context.turn_ids[-1:]
            keys = [self._turn_key(uids[0])]
            is_message = self.store.get_turn(self.session_id, uids[-1]).kind == "message"
        items = message_to_items(messages[-1])
        if not items:
            return None
        item = items[-1]
        if validate is not None:
            validate(item)
        new_leaf = self._sql.parent_key(keys[-1])
        same = self._sql.messages_of([keys[-1]]).get(keys[-1], []) if is_message else []
        if len(same) > 1:
            # A turn holding several messages cannot be cut; put the others back.
            # (The new turn's key, not _leaf(): an advanced session's leaf is its
            # branch tip, which this append does not move.)
            rest = self.store.append_messages(
                self.session_id, same[:-1], parent_id=self._sql.turn_uid(new_leaf)
            )
            new_leaf = self._turn_key(rest.id)
        return item, new_leaf, keys[-1]

    def _turn_key(self, uid: str) -> int:
        return self._sql.turn_key(self.session_id, uid)

    def _clear_sync(self) -> None:
        with self._lock, self.store.atomic():
            self._check_open()
            self._set_leaf(None)

    def _snapshot_sync(self, limit: int) -> tuple[list[Any], list[str], bool]:
        with self._lock:
            self._check_open()
            return self._read(self._leaf(), limit)

    def _replace_suffix_sync(
        self, expected: list[str], output: list[Any], prune: Callable[[Any], bool] | None
    ) -> bool:
        with self._lock, self.store.atomic():
            self._check_open()
            _, uids, _ = self._read(self._leaf(), len(expected))
            if uids != expected:
                return False
            first = self.store.get_turn(self.session_id, expected[0])
            parent = None if first.parent_id is None else self._turn_key(first.parent_id)
            if prune is not None and parent is not None:
                before = self._read(parent, None)[0]
                expired = 0
                while expired < len(before) and prune(before[expired]):
                    expired += 1
                if expired:
                    # The expired items leave the conversation: the rest starts a new root
                    # (the old path, expired items included, stays in the tree).
                    parent = self._append(before[expired:], None) if expired < len(before) else None
            self._set_leaf(self._append(output, parent))
            return True

    def _compact_sync(self, options: dict[str, Any]) -> Any:
        with self._lock:
            self._check_open()
            options.setdefault("leaf_id", self._sql.turn_uid(self._leaf()))
            result = self.store.compact(self.session_id, **options)
            row = self._sql.session_row(self.session_id)
            if getattr(result, "turn", None) is not None and row is not None:
                with self.store.atomic():
                    self._appended(row[1])  # the compaction turn is the new leaf
            return result

    def _remember_tool(self, item: Any) -> None:
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                self._tool_names[call_id] = name


# -- the SDK's settings and classes ------------------------------------------------------


async def _settled(work: Awaitable[_T]) -> _T:
    """Run a write to its end even if the caller is cancelled meanwhile.

    A write in a worker thread cannot be stopped halfway; as the SDK's sessions do, the
    caller waits for it to commit or roll back, and only then sees its cancellation, so
    that it never acts on an outcome it did not observe.
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # observed: the caller's cancellation is what it sees
        raise asyncio.CancelledError
    return task.result()


def _coerce_settings(value: Any) -> Any:
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError:  # the SDK is not installed: a plain object with .limit
        return _PlainSettings.of(value)
    if value is None:
        return SessionSettings()
    return coerce_session_settings(value)


class _PlainSettings:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit

    @classmethod
    def of(cls, value: Any) -> _PlainSettings:
        if value is None:
            return cls(None)
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {"limit"})
            if unknown:
                raise TypeError(f"Unknown session settings: {', '.join(map(str, unknown))}")
            return cls(value.get("limit"))
        return cls(getattr(value, "limit", None))


_registered: list[bool] = []


def _register_with_sdk() -> None:
    """Let the SDK's wrappers treat a NexusSession as they treat a ``SQLiteSession``.

    ``EncryptedSession.pop_item`` authenticates an item inside the pop's transaction
    only for a ``SQLiteSession`` whose ``pop_item`` is the SDK's own (which calls
    ``_pop_item_with_validation``); for any other session it pops first and decrypts
    after, so a wrong key pops every item out of the visible conversation. Registering
    as a virtual subclass and sharing that ``pop_item`` gives a NexusSession the same
    guarantee: a failed authentication rolls the pop back.

    Both are done only while the SDK's ``pop_item`` is that one-line delegation
    (checked on its code): a later SDK whose ``pop_item`` reached into SQLiteSession's
    internals would not be shared, and NexusSession would then be a foreign backend to
    the wrappers again (as documented in docs/openai-agents.md), never a broken one.
    The registration is what makes ``isinstance(NexusSession(...), SQLiteSession)``
    true; the SDK checks it only in ``EncryptedSession.pop_item``.
    """
    if _registered:
        return
    _registered.append(True)
    try:
        from agents.memory.sqlite_session import SQLiteSession
    except ImportError:
        return
    pop = SQLiteSession.__dict__.get("pop_item")
    if not delegates_to_validation(pop):
        return
    SQLiteSession.register(NexusSession)
    NexusSession.pop_item = pop  # type: ignore[method-assign,assignment]


def delegates_to_validation(pop: Any) -> bool:
    """Whether an SDK ``pop_item`` only calls ``self._pop_item_with_validation()``."""
    code = getattr(pop, "__code__", None)
    return code is not None and tuple(code.co_names) == ("_pop_item_with_validation",)
