"""Provider renderings of a context: OpenAI-compatible chat messages and Anthropic messages.

First the agent messages become LLM messages the way pi's ``convertToLlm`` does
(packages/coding-agent/src/core/messages.ts): bash executions, custom messages and
summaries become user text (summaries wrapped in their ``<summary>`` preambles);
user, assistant and tool-result messages pass through. Then each provider's shape
is written: tool calls and results paired by id, images as data URLs (OpenAI) or
base64 sources (Anthropic), thinking dropped or kept by option.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from nexus_store.blocks import (
    content_blocks,
    images,
    iter_blocks,
    texts,
    thinking_texts,
    tool_calls,
)

__all__ = ["bash_execution_text", "render_messages", "to_llm_messages"]

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


def bash_execution_text(message: Mapping[str, Any]) -> str:
    """The user text a bash execution becomes (pi's bashExecutionToText)."""
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = message.get("exitCode")
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {exit_code}"
    if message.get("truncated") and message.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {message['fullOutputPath']}]"
    return text


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def to_llm_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Convert agent messages to LLM messages (roles user, assistant, toolResult).

    Args:
        messages: pi agent messages.

    Returns:
        The LLM messages; messages of other roles are left out.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        stamp = m.get("timestamp")
        if role == "bashExecution":
            if not m.get("excludeFromContext"):
                out.append(
                    {"role": "user", "content": [_text(bash_execution_text(m))], "timestamp": stamp}
                )
        elif role == "custom":
            content = m.get("content")
            blocks = [_text(content)] if isinstance(content, str) else content or []
            out.append({"role": "user", "content": blocks, "timestamp": stamp})
        elif role == "branchSummary":
            text = BRANCH_SUMMARY_PREFIX + str(m.get("summary", "")) + BRANCH_SUMMARY_SUFFIX
            out.append({"role": "user", "content": [_text(text)], "timestamp": stamp})
        elif role == "compactionSummary":
            text = COMPACTION_SUMMARY_PREFIX + str(m.get("summary", "")) + COMPACTION_SUMMARY_SUFFIX
            out.append({"role": "user", "content": [_text(text)], "timestamp": stamp})
        elif role in ("user", "assistant", "toolResult"):
            out.append(m)
    return out


def _openai_parts(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for kind, block in iter_blocks(blocks):
        if kind == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _render_openai(llm: list[dict[str, Any]], keep_thinking: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in llm:
        role = m["role"]
        blocks = content_blocks(m.get("content"))
        if role == "user":
            out.append({"role": "user", "content": _openai_parts(blocks)})
        elif role == "assistant":
            text = "".join(texts(blocks, nonempty=True))
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {
                        "name": b.get("name"),
                        "arguments": json.dumps(b.get("arguments", {}), ensure_ascii=False),
                    },
                }
                for b in tool_calls(blocks)
            ]
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            if keep_thinking:
                thinking = "".join(thinking_texts(blocks, nonempty=True))
                if thinking:
                    message["reasoning_content"] = thinking
            if message["content"] is None and not calls and "reasoning_content" not in message:
                continue
            out.append(message)
        elif role == "toolResult":
            result_texts = texts(blocks, nonempty=True)
            attached = images(blocks)
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": m.get("toolCallId"),
                    "content": "\n".join(result_texts)
                    if result_texts
                    else ("(see attached image)" if attached else ""),
                }
            )
            if attached:
                # Tool messages cannot carry images in the chat API: attach them after it.
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Attached image(s) from tool result:"},
                            *_openai_list(attached),
                        ],
                    }
                )
    return out


def _openai_list(images: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts = _openai_parts(images)
    return parts if isinstance(parts, list) else []


def _anthropic_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kind, block in iter_blocks(blocks):
        if kind == "text" and block["text"]:
            out.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            out.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": block.get("mimeType", "image/png"),
                        "data": block.get("data", ""),
                    },
                }
            )
    return out


def _render_anthropic(llm: list[dict[str, Any]], keep_thinking: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(role: str, content: list[dict[str, Any]]) -> None:
        if not content:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)  # the API wants roles to alternate
        else:
            out.append({"role": role, "content": content})

    for m in llm:
        role = m["role"]
        blocks = content_blocks(m.get("content"))
        if role == "user":
            add("user", _anthropic_blocks(blocks))
        elif role == "assistant":
            content: list[dict[str, Any]] = []
            for kind, block in iter_blocks(blocks):
                if kind == "text" and block["text"]:
                    content.append({"type": "text", "text": block["text"]})
                elif kind == "thinking" and keep_thinking and block["thinking"]:
                    thinking: dict[str, Any] = {"type": "thinking", "thinking": block["thinking"]}
                    if block.get("thinkingSignature"):
                        thinking["signature"] = block["thinkingSignature"]
                    content.append(thinking)
                elif kind == "toolCall":
                    content.append(
                        {
                            "type": "tool_use",
                            "id": block.get("id"),
                            "name": block.get("name"),
                            "input": block.get("arguments", {}),
                        }
                    )
            add("assistant", content)
        elif role == "toolResult":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.get("toolCallId"),
                "content": _anthropic_blocks(blocks),
            }
            if m.get("isError"):
                result["is_error"] = True
            add("user", [result])
    return out


def render_messages(
    messages: Sequence[Any],
    provider: Literal["openai", "anthropic"],
    *,
    thinking: Literal["drop", "keep"] = "drop",
) -> list[dict[str, Any]]:
    """Render agent messages for a provider's API.

    Args:
        messages: pi agent messages (a Context's messages).
        provider: ``"openai"`` for OpenAI-compatible chat completions, ``"anthropic"``
            for the Anthropic Messages API.
        thinking: ``"drop"`` thinking blocks, or ``"keep"`` them (OpenAI-compatible:
            as ``reasoning_content``; Anthropic: as thinking blocks).

    Returns:
        The provider's message list (no system prompt).

    Raises:
        ValueError: For an unknown provider or thinking option.

    Example:
        >>> call = {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py"}}
        >>> messages = [
        ...     {"role": "compactionSummary", "summary": "Goal: port the CLI", "tokensBefore": 9},
        ...     {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, call]},
        ...     {"role": "toolResult", "toolCallId": "c1", "content": "1"},
        ... ]
        >>> summary, assistant, tool = render_messages(messages, "openai")
        >>> summary["role"], summary["content"].splitlines()[-3:]
        ('user', ['<summary>', 'Goal: port the CLI', '</summary>'])
        >>> assistant["content"], assistant["tool_calls"][0]["function"]["arguments"]
        ('Reading.', '{"path": "a.py"}')
        >>> tool
        {'role': 'tool', 'tool_call_id': 'c1', 'content': '1'}
        >>> [block["type"] for block in render_messages(messages, "anthropic")[1]["content"]]
        ['text', 'tool_use']
    """
    if thinking not in ("drop", "keep"):
        raise ValueError(f"thinking must be 'drop' or 'keep', not {thinking!r}")
    llm = to_llm_messages(messages)
    if provider == "openai":
        return _render_openai(llm, thinking == "keep")
    if provider == "anthropic":
        return _render_anthropic(llm, thinking == "keep")
    raise ValueError(f"unknown provider {provider!r}; choose 'openai' or 'anthropic'")
