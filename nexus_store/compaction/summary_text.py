"""Text views of agent messages for summarizers: serialization and file operations.

A summarizer never sees the raw message dicts as a chat to continue; it reads one
plain-text transcript (``[User]: ...``, ``[Assistant tool calls]: read(path=...)``)
so that a model summarizes it instead of answering it. Long tool outputs are cut
to a head, because a summary needs what a tool did, not every byte it printed.

File operations come from the ``read``, ``write`` and ``edit`` tool calls of
assistant messages (their ``path`` argument), as pi tracks them; they are stored
on a compaction turn as ``details = {"readFiles": [...], "modifiedFiles": [...]}``
and appended to its summary as ``<read-files>`` / ``<modified-files>`` blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nexus_store.blocks import content_text, iter_blocks, tool_calls

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "FileOps",
    "file_lists",
    "format_file_operations",
    "serialize_conversation",
    "strip_file_blocks",
]

TOOL_RESULT_MAX_CHARS = 2000
"""Characters of a tool result kept when serializing for a summarizer."""

READ_TOOLS = frozenset({"read"})
WRITE_TOOLS = frozenset({"write", "edit"})

_FILE_BLOCK_RE = re.compile(r"\s*<(read-files|modified-files)>\n.*?\n</\1>\s*", re.DOTALL)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[... {len(text) - limit} more characters truncated]"


def _format_args(arguments: Any) -> str:
    if isinstance(arguments, Mapping):
        return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return json.dumps(arguments, ensure_ascii=False)


def serialize_conversation(
    messages: Iterable[Mapping[str, Any]], *, tool_result_max_chars: int = TOOL_RESULT_MAX_CHARS
) -> str:
    """Render agent messages as one plain-text transcript for a summarizer.

    Args:
        messages: pi agent messages in order; unknown roles are skipped.
        tool_result_max_chars: Characters of each tool result (and bash output) kept.

    Returns:
        Paragraphs such as ``[User]: ...`` and ``[Tool result read]: ...``, separated
        by blank lines.

    Example:
        >>> call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}}
        >>> print(serialize_conversation([
        ...     {"role": "user", "content": "Why does it fail?"},
        ...     {"role": "assistant", "content": [call]},
        ...     {"role": "toolResult", "toolName": "read", "content": "x" * 10},
        ... ], tool_result_max_chars=4))
        [User]: Why does it fail?
        <BLANKLINE>
        [Assistant tool calls]: read(path="a.py")
        <BLANKLINE>
        [Tool result read]: xxxx
        <BLANKLINE>
        [... 6 more characters truncated]
    """
    parts: list[str] = []
    for msg in messages:
        role = msg.get("role")
        if role == "user":
            text = content_text(msg.get("content"))
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            texts: list[str] = []
            thinking: list[str] = []
            calls: list[str] = []
            # an empty string content says nothing; a non-empty one is one text block
            for kind, block in iter_blocks(msg.get("content") or []):
                if kind == "text":
                    texts.append(block["text"])
                elif kind == "thinking":
                    thinking.append(block["thinking"])
                elif kind == "toolCall":
                    calls.append(f"{block.get('name')}({_format_args(block.get('arguments'))})")
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = content_text(msg.get("content"))
            if text:
                label = "Tool error" if msg.get("isError") else "Tool result"
                name = msg.get("toolName")
                head = f"[{label} {name}]" if isinstance(name, str) and name else f"[{label}]"
                parts.append(f"{head}: {_truncate(text, tool_result_max_chars)}")
        elif role == "bashExecution":
            command = msg.get("command")
            output = msg.get("output")
            parts.append(
                f"[User ran]: {command}\n[Output]: "
                f"{_truncate(output if isinstance(output, str) else '', tool_result_max_chars)}"
            )
        elif role == "custom":
            text = content_text(msg.get("content"))
            if text:
                parts.append(f"[Note]: {text}")
        elif role in ("branchSummary", "compactionSummary"):
            summary = msg.get("summary")
            if isinstance(summary, str) and summary:
                label = "Branch summary" if role == "branchSummary" else "Earlier summary"
                parts.append(f"[{label}]: {summary}")
    return "\n\n".join(parts)


class FileOps:
    """Paths read and modified, collected from tool calls and earlier compactions."""

    def __init__(self) -> None:
        self.read: dict[str, None] = {}
        self.modified: dict[str, None] = {}

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Record the ``read``/``write``/``edit`` tool calls of one (assistant) message."""
        if message.get("role") != "assistant":
            return
        for call in tool_calls(message.get("content")):
            args = call.get("arguments")
            path = args.get("path") if isinstance(args, Mapping) else None
            if not isinstance(path, str) or not path:
                continue
            name = call.get("name")
            if name in READ_TOOLS:
                self.read[path] = None
            elif name in WRITE_TOOLS:
                self.modified[path] = None

    def add_details(self, details: Mapping[str, Any] | None) -> None:
        """Fold in a previous compaction's ``details`` (``readFiles``/``modifiedFiles``)."""
        if not details:
            return
        for key, target in (("readFiles", self.read), ("modifiedFiles", self.modified)):
            values = details.get(key)
            if isinstance(values, list):
                for value in values:
                    if isinstance(value, str) and value:
                        target[value] = None


def file_lists(
    messages: Iterable[Mapping[str, Any]], *previous_details: Mapping[str, Any] | None
) -> dict[str, list[str]]:
    """Return ``{"readFiles": [...], "modifiedFiles": [...]}`` for messages, sorted.

    A file that was modified is listed only under ``modifiedFiles``.

    Args:
        messages: Agent messages whose tool calls are scanned.
        *previous_details: Details of earlier compactions or branch summaries
            (``readFiles``/``modifiedFiles``), carried forward; None is skipped.

    Returns:
        The two sorted lists.
    """
    ops = FileOps()
    for details in previous_details:
        ops.add_details(details)
    for message in messages:
        ops.add_message(message)
    modified = sorted(ops.modified)
    read = sorted(p for p in ops.read if p not in ops.modified)
    return {"readFiles": read, "modifiedFiles": modified}


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """Render the file lists as the ``<read-files>``/``<modified-files>`` tail of a summary.

    Args:
        read_files: Paths only read.
        modified_files: Paths written or edited.

    Returns:
        The tail (with its leading blank line), or ``""`` when both lists are empty.

    Example:
        >>> print(format_file_operations(["a.py"], ["b.py"]).strip())
        <read-files>
        a.py
        </read-files>
        <BLANKLINE>
        <modified-files>
        b.py
        </modified-files>
    """
    blocks: list[str] = []
    if read_files:
        blocks.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        blocks.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(blocks) if blocks else ""


def strip_file_blocks(summary: str) -> str:
    """Remove ``<read-files>``/``<modified-files>`` blocks (they are re-appended fresh)."""
    return _FILE_BLOCK_RE.sub("\n\n", summary).strip()
