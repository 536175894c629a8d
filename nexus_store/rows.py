"""The codec between pi v3 entries and the rows of `turns` and `messages`.

An entry's fields are spread over real columns so that people can query them, yet
the entry comes back exactly, key for key and type for type. The rule that makes
this exact: a field goes into its column only when its value has the column's
type (a string for text columns, a 64-bit integer for integer columns, a bool for
flag columns, any JSON value for ``*_json`` columns); anything else stays in
``extra_json`` under its own key. A NULL column therefore means "absent, or kept in
extra", and decoding is: the non-NULL columns, then ``extra_json`` on top.

Message content, which is most of a transcript's bytes, is stored once: as the
``text`` column alone when the content is a plain string or a single text block
(the common shapes), and as ``content_json`` otherwise. Provider usage stays in
``extra_json`` and is copied into integer columns for queries.

Pure functions, no SQL: `store` binds these values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nexus_store import jsoncodec
from nexus_store.blocks import flatten_text

__all__ = [
    "MESSAGE_COLUMNS",
    "TURN_FIELD_COLUMNS",
    "decode_message",
    "dumps",
    "encode_entry_fields",
    "encode_message",
    "entry_from_parts",
    "is_storable_text",
    "json_content_text",
    "message_rows",
    "turn_payload",
]

# Characters a text column cannot hold everywhere: lone surrogates (not UTF-8) and NUL
# (PostgreSQL text refuses it); such strings are kept as JSON, with escapes.
_SURROGATE = re.compile("[\x00\ud800-\udfff]")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# (entry key, turns column, kind) for entry fields with a column. kind: str | int | bool | json
TURN_FIELD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("timestamp", "created_utc", "str"),
    ("summary", "summary", "str"),
    ("firstKeptEntryId", "first_kept_uid", "str"),
    ("tokensBefore", "tokens_before", "int"),
    ("tokensAfter", "tokens_after", "int"),
    ("trigger", "trigger", "str"),
    ("layer", "layer", "str"),
    ("customInstruction", "custom_instruction", "str"),
    ("messagesCompacted", "messages_compacted", "int"),
    ("details", "details_json", "json"),
    ("fromHook", "from_hook", "bool"),
    ("fromId", "from_uid", "str"),
    ("customType", "custom_type", "str"),
    ("display", "display", "bool"),
    ("data", "data_json", "json"),
    ("provider", "provider", "str"),
    ("modelId", "model_id", "str"),
    ("thinkingLevel", "thinking_level", "str"),
    ("targetId", "target_uid", "str"),
    ("label", "label", "str"),
    ("name", "name", "str"),
)

_TURN_FIELD_BY_KEY = {key: (column, kind) for key, column, kind in TURN_FIELD_COLUMNS}

# (message key, messages column, kind)
_MESSAGE_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("role", "role", "str"),
    ("toolCallId", "tool_call_id", "str"),
    ("toolName", "tool_name", "str"),
    ("isError", "is_error", "bool"),
    ("provider", "provider", "str"),
    ("model", "model", "str"),
    ("api", "api", "str"),
    ("stopReason", "stop_reason", "str"),
    ("timestamp", "timestamp_ms", "int"),
)
_MESSAGE_FIELD_BY_KEY = {key: (column, kind) for key, column, kind in _MESSAGE_FIELDS}
_USAGE_FIELDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cacheRead", "cache_read_tokens"),
    ("cacheWrite", "cache_write_tokens"),
    ("totalTokens", "total_tokens"),
)
MESSAGE_COLUMNS: tuple[str, ...] = (
    "role",
    "content_kind",
    "content_json",
    "text",
    "tokens",
    "tool_call_id",
    "tool_name",
    "is_error",
    "provider",
    "model",
    "api",
    "stop_reason",
    "timestamp_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "total_tokens",
    "cost",
    "extra_json",
    "content_zstd",
)


def dumps(value: Any) -> str:
    """Serialize to compact JSON that SQLite can store (lone surrogates escaped)."""
    return jsoncodec.dumps(value)


def is_storable_text(text: str) -> bool:
    r"""Whether a string can be a text column on every backend.

    A lone surrogate (from a ``\ud800`` escape) is not UTF-8, and PostgreSQL text
    refuses NUL; such strings are kept as escaped JSON instead (exactly).
    """
    if text.isascii():  # O(1) in CPython; then only NUL can be in the way
        return "\x00" not in text
    return _SURROGATE.search(text) is None


def _fits(value: Any, kind: str) -> bool:
    if kind == "str":
        return type(value) is str and is_storable_text(value)
    if kind == "int":
        return type(value) is int and _INT64_MIN <= value <= _INT64_MAX
    if kind == "bool":
        return type(value) is bool
    return True  # json: any value


def _column_value(value: Any, kind: str) -> Any:
    if kind == "json":
        return dumps(value)
    if kind == "bool":
        return 1 if value else 0
    return value


def _decode_column(value: Any, kind: str) -> Any:
    if kind == "json":
        return jsoncodec.loads(value)
    if kind == "bool":
        return bool(value)
    return value


def encode_entry_fields(entry: Mapping[str, Any], skip: frozenset[str]) -> dict[str, Any]:
    """Spread an entry's fields over `turns` columns.

    Args:
        entry: A pi v3 entry.
        skip: Keys handled by the caller (type, id, parentId, message, ...).

    Returns:
        Column values, including ``extra_json`` (``None`` when nothing is left over).
    """
    columns: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in entry.items():  # one pass over the entry's own keys
        if key in skip:
            continue
        spec = _TURN_FIELD_BY_KEY.get(key)
        if spec is not None and _fits(value, spec[1]):
            columns[spec[0]] = _column_value(value, spec[1])
        else:
            extra[key] = value
    columns["extra_json"] = dumps(extra) if extra else None
    return columns


def entry_from_parts(
    kind: str,
    uid: str,
    parent_uid: str | None,
    columns: Mapping[str, Any],
    extra_json: str | None,
) -> dict[str, Any]:
    """Rebuild an entry from its ``turns`` columns (without message payloads).

    Args:
        kind: The entry type.
        uid: The entry id.
        parent_uid: The parent's id, or None for a root.
        columns: Column values by name (only those of TURN_FIELD_COLUMNS are read).
        extra_json: The leftover keys.

    Returns:
        The entry dict; the caller adds ``message``/``content`` for message turns.
    """
    entry: dict[str, Any] = {"type": kind, "id": uid, "parentId": parent_uid}
    for key, column, ckind in TURN_FIELD_COLUMNS:
        value = columns.get(column)
        if value is not None:
            entry[key] = _decode_column(value, ckind)
    if extra_json:
        entry.update(jsoncodec.loads(extra_json))
    return entry


def _clean(text: str | None) -> str | None:
    if text is not None and not is_storable_text(text):
        return _SURROGATE.sub("\ufffd", text)
    return text


def json_content_text(content: Any) -> str | None:
    """The flattened text of a ``json``-kind content: what search indexes for it.

    Text blocks joined by newlines, with lone surrogates and NUL replaced by U+FFFD
    (a text column holds neither everywhere). SQLite stores it nowhere: it is derived
    from ``content_json`` when needed (issue 17), by this function, as it was on write.

    Args:
        content: The message's content value.

    Returns:
        The text, or None when the content has no text block.
    """
    return _clean(flatten_text(content))


def encode_message(message: Mapping[str, Any], tokens: int) -> dict[str, Any]:
    """Spread one agent message over `messages` columns.

    Args:
        message: A pi agent message dict.
        tokens: Its token count.

    Returns:
        Column values by name (all of MESSAGE_COLUMNS).
    """
    row: dict[str, Any] = dict.fromkeys(MESSAGE_COLUMNS)
    row["tokens"] = tokens
    rest: dict[str, Any] = {}
    for key, value in message.items():  # one pass over the message's own keys
        spec = _MESSAGE_FIELD_BY_KEY.get(key)
        if spec is not None and _fits(value, spec[1]):
            row[spec[0]] = _column_value(value, spec[1])
        else:
            rest[key] = value
    if "content" in rest:
        content = rest.pop("content")
        if type(content) is str and is_storable_text(content):
            row["content_kind"] = "string"
            row["text"] = content
        elif (
            type(content) is list
            and len(content) == 1
            and type(content[0]) is dict
            and len(content[0]) == 2
            and content[0].get("type") == "text"
            and type(content[0].get("text")) is str
            and is_storable_text(content[0]["text"])
        ):
            row["content_kind"] = "text_block"
            row["text"] = content[0]["text"]
        else:
            row["content_kind"] = "json"
            row["content_json"] = dumps(content)
            row["text"] = json_content_text(content)
    elif message.get("role") == "bashExecution" and type(rest.get("output")) is str:
        output = rest["output"]
        if is_storable_text(output):
            row["content_kind"] = "bash_output"
            row["text"] = rest.pop("output")
    usage = rest.get("usage")
    if isinstance(usage, dict):
        for key, column in _USAGE_FIELDS:
            value = usage.get(key)
            if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
                row[column] = value
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if isinstance(total, (int, float)) and not isinstance(total, bool):
            row["cost"] = float(total)
    row["extra_json"] = dumps(rest) if rest else None
    return row


def decode_message(
    role: str | None,
    content_kind: str | None,
    content_json: str | None,
    text: str | None,
    fields: Sequence[Any],
    extra_json: str | None,
) -> dict[str, Any]:
    """Rebuild an agent message from its columns.

    Args:
        role: The role column.
        content_kind: How the content is stored.
        content_json: The content JSON (kind ``json``).
        text: The text column.
        fields: Values of tool_call_id, tool_name, is_error, provider, model, api,
            stop_reason, timestamp_ms, in that order.
        extra_json: The leftover keys.

    Returns:
        The message dict, equal to the one written.
    """
    # The hot loop of context assembly: kept flat on purpose.
    message: dict[str, Any] = {} if role is None else {"role": role}
    if content_kind == "text_block":
        message["content"] = [{"type": "text", "text": text}]
    elif content_kind == "string":
        message["content"] = text
    elif content_kind == "json":
        message["content"] = _loads(content_json) if content_json is not None else None
    elif content_kind == "bash_output":
        message["output"] = text
    call_id, tool, is_error, provider, model, api, stop, stamp = fields
    if call_id is not None:
        message["toolCallId"] = call_id
    if tool is not None:
        message["toolName"] = tool
    if is_error is not None:
        message["isError"] = bool(is_error)
    if provider is not None:
        message["provider"] = provider
    if model is not None:
        message["model"] = model
    if api is not None:
        message["api"] = api
    if stop is not None:
        message["stopReason"] = stop
    if stamp is not None:
        message["timestamp"] = stamp
    if extra_json:
        message.update(_loads(extra_json))
    return message


_loads = jsoncodec.loads


_SKIP = frozenset({"type", "id", "parentId"})


def turn_payload(entry: dict[str, Any]) -> tuple[str, frozenset[str], list[dict[str, Any]]]:
    """The kind of an entry, the keys stored outside ``extra_json``, and its messages.

    A ``messages`` list of one becomes an ordinary ``message`` entry (in place).
    """
    # A type that is not storable text (not a string, or a lone surrogate from a
    # transcript's "\ud800" escape) is kept in extra_json and read back from there.
    typed = isinstance(entry.get("type"), str) and is_storable_text(entry["type"])
    kind = entry["type"] if typed else "unknown"
    skip = set(_SKIP) if typed else {"id", "parentId"}
    message_dicts: list[dict[str, Any]] = []
    if kind == "message":
        if isinstance(entry.get("message"), dict):
            message_dicts = [entry["message"]]
            skip.add("message")
        elif isinstance(entry.get("messages"), list) and all(
            isinstance(m, dict) for m in entry["messages"]
        ):
            message_dicts = entry["messages"]
            skip.add("messages")
            if len(message_dicts) == 1:
                entry["message"] = entry.pop("messages")[0]
                skip.add("message")
    elif kind == "custom_message" and "content" in entry:
        message_dicts = [{"role": "custom", "content": entry["content"]}]
        skip.add("content")
    return kind, frozenset(skip), message_dicts


def message_rows(
    key: int, message_dicts: list[dict[str, Any]], counts: list[int]
) -> list[dict[str, Any]]:
    """`messages` rows of turn ``key``."""
    rows = []
    for idx, (message, count) in enumerate(zip(message_dicts, counts, strict=True)):
        row = encode_message(message, count)
        row["turn_id"] = key
        row["idx"] = idx
        rows.append(row)
    return rows
