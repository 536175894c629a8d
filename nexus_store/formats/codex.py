"""Codex CLI rollout files (``{timestamp, type, payload}`` lines) read as pi v3 entries.

Rollouts are linear and carry no entry ids: each entry gets a deterministic
generated id and the previous entry as parent. The first ``session_meta`` line
becomes the session header (its payload id is the source id); later ones stay as
entries. ``response_item`` payloads map to pi messages:

* ``message``: role user/assistant -> pi user/assistant with ``input_text``/
  ``output_text`` -> text and data-URL ``input_image`` -> image; other roles
  (developer, system) -> a pi ``custom`` message (``customType`` ``codex.<role>``).
* ``function_call`` (arguments a JSON string) and ``custom_tool_call`` (input a
  string) -> an assistant message with one ``toolCall`` block (arguments parsed;
  ``{"input": text}`` when the string is not a JSON object).
* ``function_call_output``/``custom_tool_call_output`` -> ``toolResult``.
* ``reasoning`` -> an assistant message with ``thinking`` blocks.

A sync continues a grown rollout from its checkpoint (`resume_codex`): the entry ids
depend only on each line's object ordinal, so what the next line needs is the header,
the previous entry's id and the recent tool names, all kept in ``resume``; reading a
file whole or in pieces gives the same entries.

``compacted`` becomes a ``compaction`` entry (summary = ``payload.message``, no
firstKeptEntryId). ``event_msg``, ``turn_context`` and any other line type are kept
as entries of their own type with their payload. The line's ``type``/``payload``
fields a mapping consumed are kept under ``codexType``/``codexPayload``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from nexus_store.formats.base import (
    BoundedMap,
    LineReader,
    ParsedEntry,
    ParsedSession,
    add_extras,
    id_generator,
    iso_to_epoch_ms,
    source_id_from_name,
)

__all__ = ["parse_codex", "resume_codex"]

_PEEK = 50
_TEXT_BLOCKS = {"input_text", "output_text", "text", "summary_text"}


def parse_codex(reader: LineReader) -> ParsedSession:
    """Read a Codex CLI rollout file.

    Args:
        reader: A `LineReader` over the file.

    Returns:
        The session; its ``entries`` stream lazily.
    """
    header: dict[str, Any] = {"type": "session", "version": 3}
    meta_line: int | None = None
    for line, obj in reader.peek(_PEEK):
        payload = obj.get("payload")
        if obj.get("type") == "session_meta" and isinstance(payload, dict):
            meta_line = line
            header["codexMeta"] = payload
            if isinstance(obj.get("timestamp"), str):
                header["timestamp"] = obj["timestamp"]
            if isinstance(payload.get("cwd"), str):
                header["cwd"] = payload["cwd"]
            break
    meta = header.get("codexMeta", {})
    meta_id = meta.get("id") if isinstance(meta, dict) else None
    source_id = (
        meta_id if isinstance(meta_id, str) and meta_id else source_id_from_name(reader.path)
    )
    header["id"] = source_id
    header.setdefault("cwd", "")
    parent = meta.get("parent_thread_id") if isinstance(meta, dict) else None
    session = ParsedSession(
        path=reader.path,
        source_format="codex",
        source_version=None,
        source_id=source_id,
        header=header,
        parent_source_id=parent if isinstance(parent, str) and parent else None,
        entries=iter(()),
        problems=reader.problems,
    )
    session.resume = {
        "source_id": source_id,
        "header": header,
        "parent_source_id": session.parent_source_id,
    }
    # With no session_meta among fewer than _PEEK objects, a later line may still
    # bring one (and change the header): such a file is read whole until then.
    session.entries = _entries(reader, session, _State(), meta_line, meta_line is not None)
    return session


def resume_codex(reader: LineReader, resume: dict[str, Any]) -> ParsedSession:
    """Read the lines after a checkpoint of a rollout read before (sync).

    Args:
        reader: A `LineReader` over the new lines, starting at the checkpoint's line
            and object count (the generated ids depend on it).
        resume: The ``resume`` of the earlier `ParsedSession`.

    Returns:
        The session (same source id and header); its ``entries`` stream lazily.
    """
    session = ParsedSession.continued(reader.path, "codex", resume, reader.problems)
    state = _State.load(resume.get("state", {}))
    session.entries = _entries(reader, session, state, None, True)
    return session


class _State:
    """What reading a rollout carries from one line to the next (kept between syncs)."""

    __slots__ = ("names", "previous")

    def __init__(self) -> None:
        self.previous: str | None = None  # the previous entry's id: the next one's parent
        self.names = BoundedMap()  # tool-call id -> tool name, for toolResult

    def dump(self) -> dict[str, Any]:
        return {"previous": self.previous, "names": list(self.names.items())}

    @classmethod
    def load(cls, data: dict[str, Any]) -> _State:
        state = cls()
        state.previous = data.get("previous")
        for key, value in data.get("names", []):
            state.names.remember(key, value)
        return state


def _text(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind in _TEXT_BLOCKS and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "input_image":
        url = block.get("image_url")
        if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
            mime, data = url[5:].split(";base64,", 1)
            return {"type": "image", "data": data, "mimeType": mime}
    return block


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [_text(block) for block in content]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [] if content is None else content


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return {"input": raw}
    return parsed if isinstance(parsed, dict) else {"input": raw}


def _message(
    payload: dict[str, Any], names: BoundedMap, ms: int | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """Map a response_item payload; return the message and the payload keys consumed."""
    kind = payload.get("type", "message" if "role" in payload else None)
    message: dict[str, Any]
    if kind == "message":
        role = payload.get("role")
        content = _content(payload.get("content"))
        if role in ("user", "assistant"):
            message = {"role": role, "content": content}
        else:
            message = {"role": "custom", "customType": f"codex.{role}", "content": content}
            message["display"] = False
        used = ["role", "content"]
    elif kind in ("function_call", "custom_tool_call"):
        call_id, name = payload.get("call_id"), payload.get("name")
        raw = payload.get("arguments" if kind == "function_call" else "input")
        block = {"type": "toolCall", "id": call_id, "name": name, "arguments": _arguments(raw)}
        message = {"role": "assistant", "content": [block], "stopReason": "toolUse"}
        if isinstance(call_id, str) and isinstance(name, str):
            names.remember(call_id, name)
        used = ["call_id", "name"]  # the raw argument string stays in codexPayload
    elif kind in ("function_call_output", "custom_tool_call_output"):
        call_id = payload.get("call_id")
        output = payload.get("output")
        if isinstance(output, dict):
            output = output.get("content", output) if "content" in output else [output]
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": names.get(call_id, "") if isinstance(call_id, str) else "",
            "content": _content(output),
            "isError": False,
        }
        used = ["call_id", "output"]
    elif kind == "reasoning":
        summary = payload.get("summary")
        parts = summary if isinstance(summary, list) else []
        text = "\n".join(
            p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
        block = {"type": "thinking", "thinking": text}
        if isinstance(payload.get("encrypted_content"), str):
            block["thinkingSignature"] = payload["encrypted_content"]
        message = {"role": "assistant", "content": [block]}
        used = ["summary"]
    else:
        return None, []
    if ms is not None:
        message["timestamp"] = ms
    return message, used


def _entries(
    reader: LineReader,
    session: ParsedSession,
    state: _State,
    meta_line: int | None,
    settled: bool,
) -> Iterator[ParsedEntry]:
    make_id = id_generator(session.source_id)
    names = state.names
    for line, obj in reader:
        kind = obj.get("type")
        if kind == "session_meta" and line == meta_line:
            meta_line = None  # it is the header
            continue
        entry: dict[str, Any] = {"type": kind if isinstance(kind, str) and kind else "unknown"}
        entry["id"] = make_id(reader.count - 1)
        entry["parentId"] = state.previous
        if entry["type"] == "unknown":
            reader.report(
                line,
                "missing_field",
                f"line {line} has no string 'type'; kept as an entry of type 'unknown'",
                repaired=True,
            )
        timestamp = obj.get("timestamp")
        if isinstance(timestamp, str):
            entry["timestamp"] = timestamp
        ms = iso_to_epoch_ms(timestamp) if isinstance(timestamp, str) else None
        rest = {k: v for k, v in obj.items() if k not in ("type", "timestamp")}
        if not isinstance(timestamp, str) and "timestamp" in obj:
            rest["timestamp"] = timestamp
        payload = obj.get("payload")
        if kind == "response_item" and isinstance(payload, dict):
            message, used = _message(payload, names, ms)
            if message is not None:
                entry["type"] = "message"
                entry["message"] = message
                entry["codexType"] = kind
                rest.pop("payload")
                entry["codexPayload"] = {k: v for k, v in payload.items() if k not in used}
        elif kind == "compacted" and isinstance(payload, dict):
            entry["type"] = "compaction"
            summary = payload.get("message")
            entry["summary"] = summary if isinstance(summary, str) else ""
            entry["codexType"] = kind
            rest.pop("payload")
            entry["codexPayload"] = {k: v for k, v in payload.items() if k != "message"}
        add_extras(entry, rest)
        state.previous = entry["id"]
        yield ParsedEntry(line, entry)
    if session.resume is not None:
        if settled or reader.count >= _PEEK:
            session.resume["state"] = state.dump()
        else:
            session.resume = None
