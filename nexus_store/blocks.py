"""Content blocks, walked once: text, thinking, toolCall, image, and any other kind.

A pi agent message's ``content`` is a string or a list of blocks (dicts with a
``type``). Every reader of content (token counting, provider rendering, summaries,
the SDK adapter, the CLI views) asks this module instead of looking at ``type``
itself, so one rule decides what a text block is:

* a **text** block has ``type == "text"`` and a string ``text`` (it may be empty);
* a **thinking** block has ``type == "thinking"`` and a string ``thinking``;
* a **toolCall** block has ``type == "toolCall"`` (its ``name``/``arguments`` are
  read as they come);
* an **image** block has ``type == "image"`` (``data``, ``mimeType``);
* anything else that is a dict is ``unknown`` (kept by the store, skipped by readers);
  items that are not dicts are not blocks at all.

A string content reads as one text block.

    >>> content = [
    ...     {"type": "thinking", "thinking": "check the test"},
    ...     {"type": "text", "text": "Reading it."},
    ...     {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}},
    ...     {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
    ...     {"type": "audio"},
    ...     "not a block",
    ... ]
    >>> [kind for kind, _ in iter_blocks(content)]
    ['thinking', 'text', 'toolCall', 'image', 'unknown']
    >>> texts(content), thinking_texts(content), count_images(content)
    (['Reading it.'], ['check the test'], 1)
    >>> [call["name"] for call in tool_calls(content)]
    ['read']
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

__all__ = [
    "BlockKind",
    "block_kind",
    "content_blocks",
    "content_text",
    "count_images",
    "flatten_text",
    "images",
    "iter_blocks",
    "texts",
    "thinking_texts",
    "tool_calls",
]

BlockKind = Literal["text", "thinking", "toolCall", "image", "unknown"]


def block_kind(block: dict[str, Any]) -> BlockKind:
    """The kind of one block (see the module docstring for the rule).

    Args:
        block: A content block.

    Returns:
        ``text``, ``thinking``, ``toolCall``, ``image`` or ``unknown``.

    Example:
        >>> block_kind({"type": "text", "text": ""}), block_kind({"type": "text", "text": 5})
        ('text', 'unknown')
    """
    kind = block.get("type")
    if kind == "text":
        return "text" if isinstance(block.get("text"), str) else "unknown"
    if kind == "thinking":
        return "thinking" if isinstance(block.get("thinking"), str) else "unknown"
    if kind == "toolCall":
        return "toolCall"
    if kind == "image":
        return "image"
    return "unknown"


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """The blocks of a content value: a string is one text block; non-dicts are dropped.

    Args:
        content: A message's ``content``.

    Returns:
        The dict blocks, in order (empty for anything that is not a string or a list).

    Example:
        >>> content_blocks("hi")
        [{'type': 'text', 'text': 'hi'}]
        >>> content_blocks([{"type": "image"}, 3])
        [{'type': 'image'}]
    """
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def iter_blocks(content: Any) -> Iterator[tuple[BlockKind, dict[str, Any]]]:
    """Walk the blocks of a content value in order, each with its kind.

    Args:
        content: A message's ``content`` (a string reads as one text block).

    Yields:
        ``(kind, block)`` pairs.
    """
    if isinstance(content, str):
        yield "text", {"type": "text", "text": content}
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                yield block_kind(block), block


def texts(content: Any, *, nonempty: bool = False) -> list[str]:
    """The texts of a content value's text blocks, in order.

    Args:
        content: A message's ``content``. A string is its own one text, kept even when
            empty (pi counts it so).
        nonempty: Skip text blocks whose text is empty.

    Returns:
        The texts.

    Example:
        >>> texts([{"type": "text", "text": "a"}, {"type": "text", "text": ""}], nonempty=True)
        ['a']
    """
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and (block["text"] or not nonempty)
    ]


def thinking_texts(content: Any, *, nonempty: bool = False) -> list[str]:
    """The texts of a content list's thinking blocks, in order.

    Args:
        content: A message's ``content`` (a string has no thinking).
        nonempty: Skip thinking blocks whose text is empty.

    Returns:
        The thinking texts.
    """
    return [
        block["thinking"]
        for kind, block in iter_blocks(content)
        if kind == "thinking" and (block["thinking"] or not nonempty)
    ]


def flatten_text(content: Any, sep: str = "\n") -> str | None:
    """The text of a content value: a string, or its text blocks joined by ``sep``.

    Args:
        content: A message's ``content``.
        sep: What joins the text blocks.

    Returns:
        The text, or None when a list has no text block (or content is neither).

    Example:
        >>> flatten_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], sep="+")
        'a+b'
        >>> flatten_text([{"type": "image"}]) is None
        True
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = texts(content)
        return sep.join(parts) if parts else None
    return None


def content_text(content: Any, *, sep: str = "") -> str:
    """Like `flatten_text`, with ``""`` instead of None (summaries read it so).

    Args:
        content: A message's ``content``.
        sep: What joins the text blocks.

    Returns:
        The text (possibly empty).
    """
    return flatten_text(content, sep) or ""


def tool_calls(content: Any) -> list[dict[str, Any]]:
    """The toolCall blocks of a content list, in order.

    Args:
        content: A message's ``content`` (a string has no tool calls).

    Returns:
        The blocks themselves (``id``, ``name``, ``arguments``).
    """
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def images(content: Any) -> list[dict[str, Any]]:
    """The image blocks of a content list, in order.

    Args:
        content: A message's ``content`` (a string has no images).

    Returns:
        The blocks themselves (``data``, ``mimeType``).
    """
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "image"]


def count_images(content: Any) -> int:
    """How many image blocks a content list holds (each counts as a fixed payload).

    Args:
        content: A message's ``content``.

    Returns:
        The number of image blocks.
    """
    return len(images(content))
