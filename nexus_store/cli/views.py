"""Plain-text views of turns and contexts: previews and the ASCII tree (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nexus_store.blocks import flatten_text, tool_calls

if TYPE_CHECKING:
    from nexus_store.models import Turn

__all__ = ["FOLD_RUNS_OVER", "draw_tree", "message_preview", "turn_preview"]


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


FOLD_RUNS_OVER = 12
"""A linear run of more turns than this is folded by `draw_tree` (``tree --all`` unfolds)."""
_KEEP_ENDS = 3  # turns shown at each end of a folded run


def draw_tree(
    turns: Sequence[Turn],
    active_leaf: str | None,
    labels: Mapping[str, str],
    width: int = 60,
    fold: int | None = FOLD_RUNS_OVER,
) -> Iterable[str]:
    """Draw a session's turns as an ASCII tree.

    A chain of single children stays at one indentation (a conversation reads
    downwards); each branch point indents its children with ``├─``/``└─``. The active
    leaf is marked ``◀ active``. A linear run of more than ``fold`` plain turns (no
    branch point, compaction, branch summary, label or active leaf among them) shows
    its first and last three turns and one line saying how many are folded; None
    draws every turn.
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

    def plain(turn: Turn) -> bool:
        """A turn a fold may hide: in the middle of a chain, nothing to point at."""
        return (
            len(children.get(turn.id, [])) == 1
            and turn.kind not in ("compaction", "branch_summary")
            and turn.id not in labels
            and turn.id != active_leaf
        )

    rows: list[tuple[str, str, Turn, bool]] = []  # head, indent, turn, foldable
    # iterative walk (histories can be deeper than Python's recursion limit)
    stack: list[tuple[Turn, str, str, bool]] = []
    roots = children.get(None, [])
    for i, root in enumerate(reversed(roots)):
        last = i == 0
        stack.append(
            (
                root,
                "" if len(roots) == 1 else ("└─ " if last else "├─ "),
                "" if len(roots) == 1 else ("   " if last else "│  "),
                False,
            )
        )
    while stack:
        turn, head, indent, in_chain = stack.pop()
        rows.append((head, indent, turn, in_chain and plain(turn)))
        kids = children.get(turn.id, [])
        if len(kids) == 1:
            stack.append((kids[0], indent, indent, True))
        else:
            for i, kid in enumerate(reversed(kids)):
                last = i == 0
                stack.append(
                    (
                        kid,
                        indent + ("└─ " if last else "├─ "),
                        indent + ("   " if last else "│  "),
                        False,
                    )
                )
    n = 0
    while n < len(rows):
        end = n
        while end < len(rows) and rows[end][3] and rows[end][1] == rows[n][1]:
            end += 1
        if fold is not None and end - n > fold:
            for head, _, turn, _ in rows[n : n + _KEEP_ENDS]:
                yield head + line(turn)
            hidden = end - n - 2 * _KEEP_ENDS
            yield f"{rows[n][1]}┆ … {hidden:,} turns folded (tree --all shows every turn)"
            for head, _, turn, _ in rows[end - _KEEP_ENDS : end]:
                yield head + line(turn)
            n = end
        elif end > n:
            for head, _, turn, _ in rows[n:end]:
                yield head + line(turn)
            n = end
        else:
            head, _, turn, _ = rows[n]
            yield head + line(turn)
            n += 1
