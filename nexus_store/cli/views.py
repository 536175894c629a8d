"""Plain-text views of turns and contexts: previews and the ASCII tree (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nexus_store.blocks import flatten_text, tool_calls
from nexus_store.models import Turn

__all__ = ["draw_tree", "message_preview", "turn_preview"]


def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def message_preview(message: Any, width: int = 60) -> str:
    """One line describing an agent message: role, then text, tool calls or summary.

    Args:
        message: A pi agent message (anything else is shown by its repr).
        width: Characters of text kept (the rest becomes ``…``).

    Returns:
        The line.

    Example:
        >>> call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}
        >>> text = {"type": "text", "text": "Hm."}
        >>> message_preview({"role": "assistant", "content": [text, call]})
        'assistant: Hm. [calls read]'
    """
    if not isinstance(message, Mapping):
        return _short(repr(message), width)
    role = message.get("role", "?")
    if role in ("compactionSummary", "branchSummary"):
        return f"{role}: " + _short(str(message.get("summary", "")), width)
    if role == "bashExecution":
        return "bashExecution: $ " + _short(str(message.get("command", "")), width)
    text = flatten_text(message.get("content")) or ""
    calls = [b.get("name", "?") for b in tool_calls(message.get("content"))]
    if role == "toolResult":
        prefix = f"toolResult {message.get('toolName', '?')}" + (
            " (error)" if message.get("isError") else ""
        )
        return f"{prefix}: " + _short(text, width)
    out = f"{role}: " + _short(text, width)
    if calls:
        out += " [calls " + ", ".join(str(c) for c in calls) + "]"
    return out


def turn_preview(turn: Turn, width: int = 60) -> str:
    """One line describing a turn."""
    e = turn.entry
    if turn.kind == "message":
        messages = e.get("messages") or [e.get("message")]
        return " | ".join(message_preview(m, width) for m in messages)
    if turn.kind in ("compaction", "branch_summary"):
        return _short(str(e.get("summary", "")), width)
    if turn.kind == "custom_message":
        return f"[{e.get('customType', '?')}] " + _short(flatten_text(e.get("content")), width)
    if turn.kind == "model_change":
        return f"{e.get('provider', '?')}/{e.get('modelId', '?')}"
    if turn.kind == "thinking_level_change":
        return str(e.get("thinkingLevel"))
    if turn.kind == "label":
        return f"{e.get('targetId')} = {e.get('label')!r}"
    if turn.kind == "session_info":
        return _short(str(e.get("name", "")), width)
    if turn.kind == "custom":
        return str(e.get("customType", ""))
    return ""


def draw_tree(
    turns: Sequence[Turn], active_leaf: str | None, labels: Mapping[str, str], width: int = 60
) -> Iterable[str]:
    """Draw a session's turns as an ASCII tree.

    A chain of single children stays at one indentation (a conversation reads
    downwards); each branch point indents its children with ``├─``/``└─``. The active
    leaf is marked ``◀ active``.
    """
    children: dict[str | None, list[Turn]] = {}
    for turn in turns:
        children.setdefault(turn.parent_id, []).append(turn)

    def line(turn: Turn) -> str:
        text = f"{turn.id} {turn.kind}"
        preview = turn_preview(turn, width)
        if preview:
            text += f"  {preview}"
        if turn.id in labels:
            text += f"  [{labels[turn.id]}]"
        if turn.id == active_leaf:
            text += "  ◀ active"
        return text

    # iterative walk (histories can be deeper than Python's recursion limit)
    stack: list[tuple[Turn, str, str]] = []
    roots = children.get(None, [])
    for i, root in enumerate(reversed(roots)):
        last = i == 0
        stack.append(
            (
                root,
                "" if len(roots) == 1 else ("└─ " if last else "├─ "),
                "" if len(roots) == 1 else ("   " if last else "│  "),
            )
        )
    while stack:
        turn, head, indent = stack.pop()
        yield head + line(turn)
        kids = children.get(turn.id, [])
        if len(kids) == 1:
            stack.append((kids[0], indent, indent))
        else:
            for i, kid in enumerate(reversed(kids)):
                last = i == 0
                stack.append(
                    (kid, indent + ("└─ " if last else "├─ "), indent + ("   " if last else "│  "))
                )
