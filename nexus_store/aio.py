"""`AsyncStore`: an asyncio facade over the synchronous `Store`.

Each call runs the same synchronous method in a worker thread
(`asyncio.to_thread`); there is no second SQL path. Calls are serialized by a lock,
because one SQLite connection must not be used by two threads at once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from nexus_store.models import Context, ContextStatus, Session, Turn
from nexus_store.store import ACTIVE_LEAF, Store

__all__ = ["AsyncStore"]

T = TypeVar("T")


class AsyncStore:
    """The `Store` API as coroutines.

    Example:
        >>> import asyncio
        >>> async def main() -> int:
        ...     async with AsyncStore(memory=True, counter="chars4") as store:
        ...         s = await store.create_session()
        ...         await store.append_message(s.id, {"role": "user", "content": "hi"})
        ...         return len((await store.context(s.id)).messages)
        >>> asyncio.run(main())
        1

    Args:
        path: Database file, as for `Store`.
        **options: Options of `Store` (memory, counter, synchronous, busy_timeout).
    """

    def __init__(self, path: str | Path | None = None, **options: Any) -> None:
        self.store = Store(path, **options)
        self._lock = asyncio.Lock()

    async def _run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        async with self._lock:
            return await asyncio.to_thread(functools.partial(func, *args, **kwargs))

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the database connection."""
        await self._run(self.store.close)

    async def create_session(self, **kwargs: Any) -> Session:
        """See `Store.create_session`."""
        return await self._run(self.store.create_session, **kwargs)

    async def get_session(self, session_id: str) -> Session:
        """See `Store.get_session`."""
        return await self._run(self.store.get_session, session_id)

    async def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        """See `Store.list_sessions`."""
        return await self._run(self.store.list_sessions, limit=limit)

    async def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> Turn:
        """See `Store.append_entry`."""
        return await self._run(self.store.append_entry, session_id, entry)

    async def append_message(
        self, session_id: str, message: Mapping[str, Any], *, parent_id: Any = ACTIVE_LEAF
    ) -> Turn:
        """See `Store.append_message`."""
        return await self._run(self.store.append_message, session_id, message, parent_id=parent_id)

    async def navigate(self, session_id: str, turn_id: str | None) -> Session:
        """See `Store.navigate`."""
        return await self._run(self.store.navigate, session_id, turn_id)

    async def get_turn(self, session_id: str, turn_id: str) -> Turn:
        """See `Store.get_turn`."""
        return await self._run(self.store.get_turn, session_id, turn_id)

    async def children(self, session_id: str, turn_id: str | None) -> list[Turn]:
        """See `Store.children`."""
        return await self._run(self.store.children, session_id, turn_id)

    async def leaves(self, session_id: str) -> list[Turn]:
        """See `Store.leaves`."""
        return await self._run(self.store.leaves, session_id)

    async def path(self, session_id: str, leaf_id: str | None = None) -> list[Turn]:
        """See `Store.path`."""
        return await self._run(self.store.path, session_id, leaf_id)

    async def context(self, session_id: str, leaf_id: str | None = None) -> Context:
        """See `Store.context`."""
        return await self._run(self.store.context, session_id, leaf_id)

    async def status(
        self, session_id: str, leaf_id: str | None = None, **kwargs: Any
    ) -> ContextStatus:
        """See `Store.status`."""
        return await self._run(self.store.status, session_id, leaf_id, **kwargs)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Any other `Store` method, as a coroutine function."""
        method = getattr(self.store, name)
        if not callable(method):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(method, *args, **kwargs)

        return call
