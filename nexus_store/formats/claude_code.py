"""Claude Code JSONL (``~/.claude/projects/**/*.jsonl``) read as pi v3 entries.

Each line is a record: ``user``/``assistant`` lines carry ``uuid``, ``parentUuid``
and an Anthropic API ``message``; other lines are system, progress, attachment or
metadata records (``summary``, ``custom-title``, ``file-history-snapshot``, ...),
many without a uuid. How they map:

* ``user``/``assistant`` lines become ``message`` entries: id = uuid, parentId =
  parentUuid as written (a line with a uuid but no ``parentUuid`` key, as in old
  linear files, is chained to the previous record with a uuid). Content blocks: ``text`` stays,
  ``thinking`` -> thinking (signature -> ``thinkingSignature``), ``tool_use`` ->
  ``toolCall``, base64 ``image`` -> pi image; others are kept as they are. Each
  ``tool_result`` block becomes a ``toolResult`` message, so a user line with
  several gives ``"messages": [...]``. The API message's other fields are kept
  under ``ccMessage`` (content left out when it was converted).
* One API response split over several lines sharing ``message.id`` (and
  ``requestId``), or a line written twice: every line is its own entry, but only
  the first piece of a response carries ``usage`` in its pi message, so usage and
  cost are counted once (the repeats keep theirs in ``ccMessage.usage``). The
  responses seen are part of the state a sync resumes from, so this holds across
  syncs of a growing file too. Across files (a resumed session copies earlier
  history into a new file), a `UsageCheck` given by the store tells which
  responses another session already carries: those get no ``usage`` either.
* ``compact_boundary`` system lines start a new root in Claude Code; their parentId
  becomes ``logicalParentUuid`` so the tree stays connected (the written
  ``parentUuid`` is kept as an extra key). The ``isCompactSummary`` user record
  after it becomes a ``compaction`` entry: summary = its text, tokensBefore = the
  boundary's ``compactMetadata.preTokens``, no firstKeptEntryId.
* Lines without a uuid keep their own type, get a deterministic generated id and
  are chained to the previous entry; a line with no type becomes ``unknown``.
* Every other field of a line stays on the entry as an extra key.

Sub-agent files (first record a sidechain with an ``agentId``) get source_id
``<sessionId>/agent-<agentId>`` and ``parent_source_id`` = the sessionId.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
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

__all__ = [
    "UsageCheck",
    "convert_blocks",
    "convert_usage",
    "parse_claude_code",
    "response_key",
    "resume_claude_code",
]

_AGENT_FILE = re.compile(r"agent-[0-9A-Za-z]+")  # sub-agent transcript: agent-<agentId>.jsonl
_PEEK = 200  # records read ahead to find the session id
_RECENT = 512  # tool names remembered (bounded: memory stays flat)
# API responses remembered for counting usage once. Claude Code writes one response
# as several lines (one per content block) and sometimes writes a line twice; both
# repeat the message id and request id, usually within a few lines, so a bounded
# memory of recent ones suffices.
_SEEN = 2048
UsageCheck = Callable[[str, str], bool]
"""Called as check(source_id, response key): whether another session of the store
already carries that API response's usage (then this read gives it none)."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "refusal": "error",
}


def response_key(message_id: Any, request_id: Any) -> str | None:
    """The key of one API response: its message id and, where written, its request id.

    As ccusage keys its de-duplication. None when the message has no string id.

    Args:
        message_id: The API message's ``id``.
        request_id: The line's ``requestId``.
    """
    if not isinstance(message_id, str):
        return None
    return message_id if not isinstance(request_id, str) else f"{message_id}:{request_id}"


def parse_claude_code(reader: LineReader, usage_check: UsageCheck | None = None) -> ParsedSession:
    """Read a Claude Code session file.

    Args:
        reader: A `LineReader` over the file.
        usage_check: Tells which responses another session already carries the
            usage of (None: count within this file only).

    Returns:
        The session; its ``entries`` stream lazily.
    """
    session_id: str | None = None
    agent_id: str | None = None
    header: dict[str, Any] = {"type": "session", "version": 3}
    for _, obj in reader.peek(_PEEK):
        sid = obj.get("sessionId")
        if session_id is None and isinstance(sid, str) and sid:
            session_id = sid
            for key in ("timestamp", "cwd", "version", "gitBranch"):
                if isinstance(obj.get(key), str):
                    header["ccVersion" if key == "version" else key] = obj[key]
            agent = obj.get("agentId")
            if obj.get("isSidechain") is True and isinstance(agent, str) and agent:
                agent_id = agent
        if isinstance(obj.get("timestamp"), str) and "timestamp" not in header:
            header["timestamp"] = obj["timestamp"]
    name = reader.path.replace("\\", "/").rsplit("/", 1)[-1]
    stem = source_id_from_name(name)
    if agent_id is None and session_id is not None and _AGENT_FILE.fullmatch(stem):
        agent_id = stem[len("agent-") :]
    parent: str | None = None
    if session_id is None:
        source_id = source_id_from_name(reader.path)
    elif agent_id is not None:
        source_id, parent = f"{session_id}/agent-{agent_id}", session_id
        header["agentId"] = agent_id
    else:
        source_id = session_id
    header["id"] = source_id
    header.setdefault("cwd", "")
    session = ParsedSession(
        path=reader.path,
        source_format="claude_code",
        source_version=None,
        source_id=source_id,
        header=header,
        parent_source_id=parent,
        entries=iter(()),
        problems=reader.problems,
    )
    session.resume = {"source_id": source_id, "header": header, "parent_source_id": parent}
    session.entries = _entries(reader, session, _State(), usage_check)
    return session


def convert_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Turn Anthropic API usage into pi's usage object.

    Args:
        usage: ``{"input_tokens", "output_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens", ...}``.

    Returns:
        ``{"input", "output", "cacheRead", "cacheWrite", "totalTokens"}``.
    """

    def num(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    result = {
        "input": num("input_tokens"),
        "output": num("output_tokens"),
        "cacheRead": num("cache_read_input_tokens"),
        "cacheWrite": num("cache_creation_input_tokens"),
    }
    result["totalTokens"] = sum(result.values())
    return result


def convert_blocks(content: Any) -> Any:
    """Turn Anthropic content blocks (not tool results) into pi content blocks.

    Args:
        content: A string or a list of blocks.

    Returns:
        The pi content: the string as is, or a list of converted blocks (unknown
        blocks and non-dict items are kept unchanged).
    """
    if not isinstance(content, list):
        return content
    return [_block(block) for block in content]


def _block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    rest = {k: v for k, v in block.items() if k != "type"}
    if kind == "thinking":
        out: dict[str, Any] = {"type": "thinking", "thinking": rest.pop("thinking", "")}
        if "signature" in rest:
            out["thinkingSignature"] = rest.pop("signature")
        return {**out, **rest}
    if kind == "redacted_thinking":
        return {
            "type": "thinking",
            "thinking": "",
            "redacted": True,
            "thinkingSignature": block.get("data"),
        }
    if kind == "tool_use":
        out = {"type": "toolCall", "id": rest.pop("id", None), "name": rest.pop("name", None)}
        out["arguments"] = rest.pop("input", {})
        return {**out, **rest}
    if kind == "image":
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == "base64":
            return {
                "type": "image",
                "data": source.get("data"),
                "mimeType": source.get("media_type"),
            }
    return block


def _tool_result(block: dict[str, Any], names: BoundedMap, ms: int | None) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    content = block.get("content")
    if isinstance(content, str):
        blocks: Any = [{"type": "text", "text": content}]
    elif content is None:
        blocks = []
    else:
        blocks = convert_blocks(content)
    message: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": names.get(call_id, "") if isinstance(call_id, str) else "",
        "content": blocks,
        "isError": block.get("is_error") is True,
    }
    extra = {
        k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content", "is_error")
    }
    if extra:
        message["ccBlock"] = extra
    if ms is not None:
        message["timestamp"] = ms
    return message


def _user_messages(content: Any, names: BoundedMap, ms: int | None) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        message: dict[str, Any] = {"role": "user", "content": content}
        if ms is not None:
            message["timestamp"] = ms
        return [message]
    messages: list[dict[str, Any]] = []
    pending: list[Any] = []

    def flush() -> None:
        if pending:
            user: dict[str, Any] = {"role": "user", "content": convert_blocks(list(pending))}
            if ms is not None:
                user["timestamp"] = ms
            messages.append(user)
            pending.clear()

    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            flush()
            messages.append(_tool_result(block, names, ms))
        else:
            pending.append(block)
    flush()
    if not messages:
        messages.append({"role": "user", "content": []})
    return messages


def _assistant_message(
    api: dict[str, Any],
    names: BoundedMap,
    seen: BoundedMap,
    ms: int | None,
    request_id: Any,
    elsewhere: Callable[[str], bool] | None,
) -> dict[str, Any]:
    content = api.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    blocks = convert_blocks(content if content is not None else [])
    message: dict[str, Any] = {"role": "assistant", "content": blocks}
    message["api"] = "anthropic-messages"
    message["provider"] = "anthropic"
    if isinstance(api.get("model"), str):
        message["model"] = api["model"]
    key = response_key(api.get("id"), request_id)
    first_piece = key is None or (key not in seen and (elsewhere is None or not elsewhere(key)))
    if key is not None:
        seen.remember(key, key)
    usage = api.get("usage")
    if isinstance(usage, dict) and first_piece:
        message["usage"] = convert_usage(usage)
    stop = api.get("stop_reason")
    if isinstance(stop, str):
        message["stopReason"] = _STOP_REASONS.get(stop, stop)
    if ms is not None:
        message["timestamp"] = ms
    if isinstance(blocks, list):
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                if isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                    names.remember(block["id"], block["name"])
    return message


class _State:
    """What reading a Claude Code file carries from one line to the next.

    Kept between syncs (`dump`/`load`) so that reading only the lines after a
    checkpoint links, names and de-duplicates exactly as a whole-file read.
    """

    __slots__ = ("linked", "names", "pre_tokens", "previous", "seen", "trigger")

    def __init__(self) -> None:
        self.previous: str | None = None  # the previous entry, for lines without a uuid
        self.linked: str | None = None  # previous record with a uuid (no parent key)
        self.names = BoundedMap(_RECENT)  # tool-call id -> tool name, for toolResult
        self.seen = BoundedMap(_SEEN)  # API responses (message id + request id) given usage
        self.pre_tokens: Any = None
        self.trigger: Any = None

    def dump(self) -> dict[str, Any]:
        return {
            "previous": self.previous,
            "linked": self.linked,
            "names": list(self.names.items()),
            "seen": list(self.seen),
            "pre_tokens": self.pre_tokens,
            "trigger": self.trigger,
        }

    @classmethod
    def load(cls, data: dict[str, Any]) -> _State:
        state = cls()
        state.previous = data.get("previous")
        state.linked = data.get("linked")
        for key, value in data.get("names", []):
            state.names.remember(key, value)
        for key in data.get("seen", []):
            state.seen.remember(key, key)
        state.pre_tokens = data.get("pre_tokens")
        state.trigger = data.get("trigger")
        return state


def resume_claude_code(
    reader: LineReader, resume: dict[str, Any], usage_check: UsageCheck | None = None
) -> ParsedSession:
    """Read the lines after a checkpoint of a Claude Code file read before.

    Args:
        reader: A `LineReader` over the new lines (starting at the checkpoint's line
            and object count).
        resume: The ``resume`` of the earlier `ParsedSession`.
        usage_check: As for `parse_claude_code`.

    Returns:
        The session (same source id and header); its ``entries`` stream lazily.
    """
    session = ParsedSession.continued(reader.path, "claude_code", resume, reader.problems)
    state = _State.load(resume.get("state", {}))
    session.entries = _entries(reader, session, state, usage_check)
    return session


def _entries(
    reader: LineReader, session: ParsedSession, state: _State, usage_check: UsageCheck | None
) -> Iterator[ParsedEntry]:
    make_id = id_generator(session.source_id)
    source_id = session.source_id
    elsewhere = None if usage_check is None else (lambda key: usage_check(source_id, key))
    for line, obj in reader:
        has_uuid = isinstance(obj.get("uuid"), str) and bool(obj["uuid"])
        entry = _entry(
            reader,
            line,
            obj,
            make_id,
            state.linked if has_uuid else state.previous,
            state.names,
            state.seen,
            elsewhere,
        )
        if obj.get("subtype") == "compact_boundary":
            meta = obj.get("compactMetadata")
            meta = meta if isinstance(meta, dict) else {}
            state.pre_tokens = meta.get("preTokens")
            state.trigger = meta.get("trigger", obj.get("trigger"))
        elif entry["type"] == "compaction":
            if state.pre_tokens is not None:
                entry.setdefault("tokensBefore", state.pre_tokens)
            if isinstance(state.trigger, str):
                entry.setdefault("trigger", state.trigger)
            state.pre_tokens = state.trigger = None
        state.previous = entry["id"]
        if has_uuid:
            state.linked = entry["id"]
        yield ParsedEntry(line, entry)
    if session.resume is not None:
        session.resume["state"] = state.dump()


def _entry(
    reader: LineReader,
    line: int,
    obj: dict[str, Any],
    make_id: Callable[[int], str],
    previous: str | None,
    names: BoundedMap,
    seen: BoundedMap,
    elsewhere: Callable[[str], bool] | None,
) -> dict[str, Any]:
    kind = obj.get("type")
    uuid = obj.get("uuid")
    rest = {k: v for k, v in obj.items() if k not in ("type", "uuid", "parentUuid", "timestamp")}
    entry: dict[str, Any] = {"type": kind if isinstance(kind, str) and kind else "unknown"}
    if entry["type"] == "unknown":
        reader.report(
            line,
            "missing_field",
            f"line {line} has no string 'type'; kept as an entry of type 'unknown'",
            repaired=True,
        )
    if isinstance(uuid, str) and uuid:
        entry["id"] = uuid
    else:
        entry["id"] = make_id(reader.count - 1)
        if uuid is not None:
            rest["uuid"] = uuid
    if "parentUuid" in obj:
        parent = obj["parentUuid"]
        entry["parentId"] = parent if isinstance(parent, str) else None
        if parent is not None and not isinstance(parent, str):
            rest["parentUuid"] = parent
    else:
        entry["parentId"] = previous  # no link written: file order is the chain
    if obj.get("subtype") == "compact_boundary" and isinstance(obj.get("logicalParentUuid"), str):
        if "parentUuid" in obj:
            rest["parentUuid"] = obj["parentUuid"]
        entry["parentId"] = obj["logicalParentUuid"]
    timestamp = obj.get("timestamp")
    if isinstance(timestamp, str):
        entry["timestamp"] = timestamp
    elif "timestamp" in obj:
        rest["timestamp"] = timestamp
    ms = iso_to_epoch_ms(timestamp) if isinstance(timestamp, str) else None
    if kind in ("user", "assistant") and "message" in obj:
        _message_fields(reader, line, obj, entry, rest, names, seen, ms, elsewhere)
        if entry["type"] != kind:
            entry["ccType"] = kind
    add_extras(entry, rest)
    return entry


def _message_fields(
    reader: LineReader,
    line: int,
    obj: dict[str, Any],
    entry: dict[str, Any],
    rest: dict[str, Any],
    names: BoundedMap,
    seen: BoundedMap,
    ms: int | None,
    elsewhere: Callable[[str], bool] | None,
) -> None:
    api = rest.pop("message")
    if not isinstance(api, dict):
        rest["ccMessage"] = api
        reader.report(
            line,
            "bad_type",
            f"line {line}: 'message' is a {type(api).__name__}, not an object; "
            f"kept as an entry of type {entry['type']!r} with no message",
            repaired=True,
        )
        return
    kept = {k: v for k, v in api.items() if k != "content"}
    content = api.get("content")
    if obj.get("isCompactSummary") is True and obj.get("type") == "user":
        entry["type"] = "compaction"
        entry["summary"] = _text_of(content)
        if not isinstance(content, str):
            kept["content"] = content
        rest["ccMessage"] = kept
        return
    if obj.get("type") == "assistant":
        entry["type"] = "message"
        entry["message"] = _assistant_message(api, names, seen, ms, obj.get("requestId"), elsewhere)
    else:
        entry["type"] = "message"
        messages = _user_messages(content, names, ms)
        if len(messages) == 1:
            entry["message"] = messages[0]
        else:
            entry["messages"] = messages
    rest["ccMessage"] = kept


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict)]
        return "\n".join(t for t in texts if isinstance(t, str))
    return ""
