"""SDK items <-> pi messages: how `NexusSession` stores an OpenAI Agents SDK item as a turn.

Each SDK item (a Responses-API input item) becomes one ``message`` turn. The message is
the item in pi's shape, so that token counts, search, tool columns, the provider
renderings and compaction work on it:

- input messages (``{"role": "user", "content": ...}``) keep their role; ``input_text``
  parts become ``text`` blocks;
- assistant output messages become ``assistant`` messages with ``text`` blocks;
- ``function_call`` becomes an ``assistant`` message with one ``toolCall`` block;
- ``function_call_output`` becomes a ``toolResult`` (with the tool's name when the
  call was seen);
- ``reasoning`` becomes an ``assistant`` message with ``thinking`` blocks;
- any other item is kept whole under the role ``openaiItem`` (no tokens counted), with
  the tool it names (if any) as ``toolName`` so that the ``tool_name`` column has it.

A small ``openaiAgents`` key on the message records how to turn it back. Every item is
converted back before it is written, and one that would not come back equal is stored
whole instead, so reading returns exactly the items given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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

__all__ = ["MARK", "item_to_message", "message_to_items"]

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
        TypeError: If the item is not a JSON object (the SDK's sessions raise
            TypeError for an item ``json.dumps`` refuses).
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item must be a dict (a Responses input item), not {item!r}")
    try:
        plain = json.loads(json.dumps(item))
    except (TypeError, ValueError) as err:
        raise TypeError(f"a session item must be JSON-serializable: {err}") from None
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


# -- what kind of item (AdvancedSQLiteSession's classification) ---------------------------

_NAMED_BY_TYPE = {
    "computer_call",
    "file_search_call",
    "web_search_call",
    "code_interpreter_call",
    "shell_call",
    "apply_patch_call",
}


def classify(item: Any) -> tuple[str, str | None]:
    """The type and tool name of an SDK item, as ``AdvancedSQLiteSession`` records them.

    Args:
        item: An SDK input item.

    Returns:
        ``(item_type, tool_name)``: ``user``/``assistant`` for messages of those roles,
        else the item's ``type`` (``other`` without one); the tool a call names
        (``namespace.name``, ``server_label.name`` for MCP), or None.
    """
    if not isinstance(item, Mapping):
        return "other", None
    role = item.get("role")
    kind = item.get("type")
    item_type = (
        "user" if role == "user" else "assistant" if role == "assistant" else str(kind or "other")
    )
    return item_type, _tool_name(item, kind)


def _tool_name(item: Mapping[str, Any], kind: Any) -> str | None:
    if kind in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label, name = item.get("server_label"), item.get("name")
        if name and label:
            return f"{label}.{name}"
        return str(label) if label else str(name) if name else None
    if kind in ("tool_search_call", "tool_search_output"):
        return "tool_search"
    if kind in _NAMED_BY_TYPE:
        return str(kind)
    if "name" not in item or item.get("name") is None:
        return None
    name = str(item["name"])
    namespace = item.get("namespace")
    space = str(namespace) if namespace is not None else None
    if not name or not space or space == name:
        return name  # no namespace, or the reserved deferred top-level shape
    return f"{space}.{name}"
