"""OpenAI Agents SDK sessions on nexus_store's turn tree.

- `NexusSession`: a drop-in for the SDK's ``SQLiteSession``;
- `NexusAdvancedSession`: a drop-in for ``AdvancedSQLiteSession`` (named branches that
  copy nothing, usage per user turn, turns, search, tool usage by SQL);
- `item_to_message` / `message_to_items`: how an SDK item is stored as a pi message.

Install the SDK with the ``openai-agents`` extra. See docs/openai-agents.md.
"""

from __future__ import annotations

from nexus_store.openai_agents.advanced import NexusAdvancedSession
from nexus_store.openai_agents.items import MARK, classify, item_to_message, message_to_items
from nexus_store.openai_agents.session import NexusSession

__all__ = [
    "MARK",
    "NexusAdvancedSession",
    "NexusSession",
    "classify",
    "item_to_message",
    "message_to_items",
]
