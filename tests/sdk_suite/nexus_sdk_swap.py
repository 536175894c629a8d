"""A pytest plugin that runs the OpenAI Agents SDK's own tests against nexus_store's sessions.

Loaded with ``-p nexus_sdk_swap`` into a pytest run of the SDK's test files (see
tests/test_sdk_suite.py). Before any test module is imported it replaces the SDK's
``SQLiteSession`` and ``AdvancedSQLiteSession`` where the tests import them from
(``agents``, ``agents.memory``, ``agents.extensions.memory``) with subclasses of the
nexus sessions that carry the replaced class's name (so messages such as
"SQLiteSession is closed" read the same). The SDK's own modules keep their classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import agents
import agents.extensions.memory as extensions_memory
import agents.memory as memory

from nexus_store.openai_agents import NexusAdvancedSession, NexusSession


class SQLiteSession(NexusSession):
    """NexusSession under the name of the class it replaces."""

    def __init__(self, session_id: str, db_path: str | Path = ":memory:", **options: Any) -> None:
        super().__init__(session_id, db_path, **options)


class AdvancedSQLiteSession(NexusAdvancedSession):
    """NexusAdvancedSession under the name of the class it replaces."""

    def __init__(
        self, *, session_id: str, db_path: str | Path = ":memory:", **options: Any
    ) -> None:
        super().__init__(session_id, db_path, **options)


agents.SQLiteSession = SQLiteSession  # type: ignore[misc]
memory.SQLiteSession = SQLiteSession  # type: ignore[misc]
extensions_memory.AdvancedSQLiteSession = AdvancedSQLiteSession  # type: ignore[attr-defined]
