"""An OpenAI Agents SDK ``Session`` backed by nexus_store.

`NexusSession` implements the SDK's ``Session`` protocol (``agents.memory.Session``:
``session_id``, ``session_settings``, async ``get_items``, ``add_items``,
``pop_item``, ``clear_session``) structurally, so it needs no import of the SDK and
works with ``Runner.run(agent, input, session=NexusSession(...))``. Install the SDK
with the ``openai-agents`` extra.

Each SDK item (a Responses-API input item) becomes one ``message`` turn, the child of
the session's active leaf. The message is the item in pi's shape, so that token
counts, search, tool columns, the provider renderings and compaction work on it:

- input messages (``{"role": "user", "content": ...}``) keep their role; ``input_text``
  parts become ``text`` blocks;
- assistant output messages become ``assistant`` messages with ``text`` blocks;
- ``function_call`` becomes an ``assistant`` message with one ``toolCall`` block;
- ``function_call_output`` becomes a ``toolResult`` (with the tool's name when the
  call was seen);
- ``reasoning`` becomes an ``assistant`` message with ``thinking`` blocks;
- any other item is kept whole under the role ``openaiItem`` (no tokens counted).

A small ``openaiAgents`` key on the message records how to turn it back. Every item is
converted back before it is written, and one that would not come back equal is
stored whole instead, so ``get_items`` returns exactly the items given.

History is never deleted: ``pop_item`` moves the active leaf back to before the
last item's turn, and ``clear_session`` moves it before the first turn, so the next
item starts a new branch. ``get_items`` returns the context of the active leaf, so
once a compaction is on the path, the items before it are replaced by its summary
(as a user message), as the model sees them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nexus_store.blocks import texts, tool_calls
from nexus_store.errors import InvalidEntry
from nexus_store.render import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    to_llm_messages,
)
from nexus_store.store import Store

__all__ = ["MARK", "NexusSession", "item_to_message", "message_to_items"]

MARK = "openaiAgents"
"""Message key that records how a stored message turns back into an SDK item."""

_JSON_FORMS: dict[str, dict[str, Any]] = {
    "compact": {"ensure_ascii": False, "separators": (",", ":")},
    "spaced": {"ensure_ascii": False},
}


# -- items <-> messages (pure) --------------------------------------------------------


def _parts_to_blocks(parts: Any, text_type: str) -> list[Any] | None:
    """SDK content parts to pi blocks: parts of type ``text_type`` become text blocks."""
    if not isinstance(parts, list):
        return None
    blocks: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and part.get("type") == text_type and "text" in part:
            blocks.append({**part, "type": "text"})
        elif isinstance(part, dict) and part.get("type") == "text":
            return None  # a pi-style block in SDK input: not reversible, store whole
        else:
            blocks.append(part)
    return blocks


def _blocks_to_parts(blocks: Any, text_type: str) -> Any:
    if not isinstance(blocks, list):
        return blocks
    return [
        {**b, "type": text_type} if isinstance(b, dict) and b.get("type") == "text" else b
        for b in blocks
    ]


def _lift(item: Mapping[str, Any], tool_names: Mapping[str, str]) -> dict[str, Any] | None:
    kind = item.get("type")
    rest = {k: v for k, v in item.items() if k not in ("type", "role", "content")}
    role = item.get("role")
    if isinstance(role, str) and kind in (None, "message") and role != "assistant":
        message: dict[str, Any] = {"role": role, **rest, MARK: {"kind": "input"}}
        if kind is not None:
            message[MARK]["typed"] = True
        if "content" in item:
            content = item["content"]
            if not isinstance(content, str):
                content = _parts_to_blocks(content, "input_text")
                if content is None:
                    return None
            message["content"] = content
        return message
    if role == "assistant" and kind in (None, "message"):
        content = item.get("content")
        mark: dict[str, Any] = {"kind": "output"}
        if kind is None:
            mark["typed"] = False
        if isinstance(content, str):
            blocks: Any = [{"type": "text", "text": content}]
            mark["string"] = True
        else:
            blocks = _parts_to_blocks(content, "output_text")
            if blocks is None:
                return None
        return {"role": "assistant", "content": blocks, **rest, MARK: mark}
    if kind == "function_call":
        rest = {k: v for k, v in rest.items() if k not in ("call_id", "name", "arguments")}
        raw = item.get("arguments")
        form = "raw"
        arguments: Any = raw
        if isinstance(raw, str):
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            for name, options in _JSON_FORMS.items():
                if parsed is not None and json.dumps(parsed, **options) == raw:
                    form, arguments = name, parsed
                    break
        call = {"type": "toolCall", "id": item.get("call_id"), "name": item.get("name")}
        call["arguments"] = arguments
        return {
            "role": "assistant",
            "content": [call],
            **rest,
            MARK: {"kind": "function_call", "arguments": form},
        }
    if kind == "function_call_output":
        rest = {k: v for k, v in rest.items() if k not in ("call_id", "output")}
        output = item.get("output")
        mark = {"kind": "function_call_output"}
        if isinstance(output, str):
            content = [{"type": "text", "text": output}]
        else:
            content = _parts_to_blocks(output, "input_text")
            if content is None:
                return None
            mark["list"] = True
        message = {"role": "toolResult", "toolCallId": item.get("call_id"), "content": content}
        tool_name = tool_names.get(str(item.get("call_id")))
        if tool_name is not None and "toolName" not in rest:
            message["toolName"] = tool_name
            mark["addedToolName"] = True
        return {**message, **rest, MARK: mark}
    if kind == "reasoning" and "content" not in item and isinstance(item.get("summary"), list):
        summary = item["summary"]
        if not all(isinstance(s, dict) and s.get("type") == "summary_text" for s in summary):
            return None
        rest.pop("summary", None)
        thinking = [
            {"type": "thinking", "thinking": s.get("text"), **_without(s, ("type", "text"))}
            for s in summary
        ]
        return {"role": "assistant", "content": thinking, **rest, MARK: {"kind": "reasoning"}}
    return None


def _without(mapping: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


def _unlift(message: Mapping[str, Any]) -> dict[str, Any]:
    mark = message[MARK]
    kind = mark.get("kind")
    rest = _without(message, ("role", "content", MARK))
    if "item" in mark:
        item: dict[str, Any] = mark["item"]
        return item
    if kind == "input":
        item = {"role": message["role"], **rest}
        if mark.get("typed"):
            item["type"] = "message"
        if "content" in message:
            content = message["content"]
            item["content"] = (
                content if isinstance(content, str) else _blocks_to_parts(content, "input_text")
            )
        return item
    if kind == "output":
        item = {"role": "assistant", **rest}
        if mark.get("typed", True):
            item["type"] = "message"
        blocks: Any = message.get("content")
        if mark.get("string"):
            item["content"] = blocks[0]["text"]
        else:
            item["content"] = _blocks_to_parts(blocks, "output_text")
        return item
    if kind == "function_call":
        call = message["content"][0]
        arguments = call.get("arguments")
        form = mark.get("arguments", "raw")
        if form in _JSON_FORMS:
            arguments = json.dumps(arguments, **_JSON_FORMS[form])
        return {
            "type": "function_call",
            "call_id": call.get("id"),
            "name": call.get("name"),
            "arguments": arguments,
            **rest,
        }
    if kind == "function_call_output":
        rest = _without(rest, ("toolCallId",))
        if mark.get("addedToolName"):
            rest.pop("toolName", None)
        content = message["content"]
        output = _blocks_to_parts(content, "input_text") if mark.get("list") else content[0]["text"]
        return {
            "type": "function_call_output",
            "call_id": message.get("toolCallId"),
            "output": output,
            **rest,
        }
    if kind == "reasoning":
        summary = [
            {"type": "summary_text", "text": b.get("thinking"), **_without(b, ("type", "thinking"))}
            for b in message.get("content", [])
        ]
        return {"type": "reasoning", "summary": summary, **rest}
    raise InvalidEntry(f"unknown {MARK} kind {kind!r} in a stored message")


def item_to_message(
    item: Mapping[str, Any], tool_names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Turn an SDK input item into the pi message stored for it.

    Args:
        item: A Responses-API input item (a JSON object).
        tool_names: Tool names by call id, to name the tool of a function call output.

    Returns:
        A pi agent message; `message_to_items` gives back an item equal to ``item``.

    Raises:
        InvalidEntry: If the item is not a JSON object.
    """
    if not isinstance(item, Mapping):
        raise InvalidEntry(f"a session item must be a dict (a Responses input item), not {item!r}")
    try:
        plain = json.loads(json.dumps(item))
    except (TypeError, ValueError) as err:
        raise InvalidEntry(f"a session item must be JSON-serializable: {err}") from None
    if MARK not in plain:
        message = _lift(plain, tool_names or {})
        if message is not None:
            try:
                back = _unlift(json.loads(json.dumps(message)))
            except (KeyError, IndexError, TypeError):
                back = None
            if back == plain:
                return message
    return {"role": "openaiItem", MARK: {"item": plain}}


def message_to_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Turn a stored message back into SDK input items.

    A message written by `NexusSession` gives back its item exactly. Other messages
    (written natively or imported from pi) are converted as the model would see them:
    text as user/assistant messages, tool calls and results as function calls and
    outputs, summaries and custom messages as user text; thinking is dropped.

    Args:
        message: A pi agent message.

    Returns:
        The items (none, one, or several for an assistant message with tool calls).
    """
    if isinstance(message.get(MARK), dict):
        return [_unlift(message)]
    items: list[dict[str, Any]] = []
    role = message.get("role")
    if role == "compactionSummary":
        text = (
            COMPACTION_SUMMARY_PREFIX + str(message.get("summary", "")) + COMPACTION_SUMMARY_SUFFIX
        )
        return [{"role": "user", "content": text}]
    if role == "branchSummary":
        text = BRANCH_SUMMARY_PREFIX + str(message.get("summary", "")) + BRANCH_SUMMARY_SUFFIX
        return [{"role": "user", "content": text}]
    for llm in to_llm_messages([dict(message)]):
        content = llm.get("content")
        text = "\n".join(texts(content))
        if llm["role"] == "toolResult":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": llm.get("toolCallId"),
                    "output": text,
                }
            )
            continue
        if text:
            items.append({"role": llm["role"], "content": text})
        for block in tool_calls(content):
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": json.dumps(block.get("arguments", {}), ensure_ascii=False),
                }
            )
    return items


# -- the session ------------------------------------------------------------------------


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
        db_path: The database file (created if missing), or ``":memory:"``.
        store: An open `Store` to use instead of ``db_path`` (not closed by `close`).
        session_settings: The SDK's ``SessionSettings`` (e.g. a default ``limit``
            for ``get_items``), or a dict of its fields.
        cwd: Working directory recorded on a new session.
        title: Title recorded on a new session.

    Raises:
        StoreOpenError: If the database cannot be opened.
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
        self.session_id = session_id
        self.session_settings = _coerce_settings(session_settings)
        self._owns_store = store is None
        if store is not None:
            self.store = store
        elif str(db_path) == ":memory:":
            self.store = Store(memory=True)
        else:
            self.store = Store(db_path)
        self._lock = threading.Lock()
        self._tool_names: dict[str, str] = {}
        if self.store.find_session(session_id) is None:
            self.store.create_session(id=session_id, cwd=cwd, title=title)

    # -- the SDK protocol ------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """Return the conversation's items, oldest first (the latest ``limit`` of them).

        Args:
            limit: At most this many items, the most recent; None uses
                ``session_settings.limit`` (all items when that is None too).

        Returns:
            The items of the active branch's context, exactly as they were added.
        """
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        return await asyncio.to_thread(self._get_items_sync, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append items to the conversation, each as one turn, in one transaction.

        Args:
            items: Responses-API input items.

        Raises:
            InvalidEntry: If an item is not a JSON object.
        """
        if items:
            await asyncio.to_thread(self._add_items_sync, list(items))

    async def pop_item(self) -> Any | None:
        """Remove the most recent item from the conversation and return it.

        Nothing is deleted: the active leaf moves back to before the item's turn, so
        the next item starts a new branch there.

        Returns:
            The item, or None when the conversation is empty.
        """
        return await asyncio.to_thread(self._pop_item_sync)

    async def clear_session(self) -> None:
        """Start the conversation over: the active leaf moves before the first turn.

        The old branch stays in the database (see ``nexus-store tree``).
        """
        await asyncio.to_thread(self._clear_sync)

    # -- the rest ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the database if this session opened it."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> NexusSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get_items_sync(self, limit: int | None) -> list[Any]:
        with self._lock:
            messages = self.store.context(self.session_id).messages
        items = [item for message in messages for item in message_to_items(message)]
        for item in items:
            self._remember_tool(item)
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    def _add_items_sync(self, items: list[Any]) -> None:
        with self._lock, self.store.atomic():
            for item in items:
                self._remember_tool(item)
                self.store.append_message(self.session_id, item_to_message(item, self._tool_names))

    def _pop_item_sync(self) -> Any | None:
        with self._lock, self.store.atomic():
            context = self.store.context(self.session_id)
            if not context.messages:
                return None
            turn_id = context.turn_ids[-1]
            same = [
                m for m, t in zip(context.messages, context.turn_ids, strict=True) if t == turn_id
            ]
            turn = self.store.get_turn(self.session_id, turn_id)
            self.store.navigate(self.session_id, turn.parent_id)
            if len(same) > 1 and turn.kind == "message":
                # A turn holding several messages cannot be cut; put the others back.
                self.store.append_messages(self.session_id, same[:-1])
            items = message_to_items(context.messages[-1])
            return items[-1] if items else None

    def _clear_sync(self) -> None:
        with self._lock:
            self.store.navigate(self.session_id, None)

    def _remember_tool(self, item: Any) -> None:
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                self._tool_names[call_id] = name


def _coerce_settings(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    try:
        from agents.memory import SessionSettings  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # the SDK is not installed: keep a plain object with .limit
        return _PlainSettings(value.get("limit"))
    return SessionSettings(**value)


class _PlainSettings:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
