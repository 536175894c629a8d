"""A small reference implementation of pi's buildSessionContext, written from DESIGN.md.

It is deliberately naive: an in-memory dict of entries and a walk from the leaf to
the root, exactly as the DESIGN.md "Context assembly" section states the semantics.
The store's SQL assembly is checked against it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

UNDEFINED = object()


def js_ms(value: Any) -> int | None:
    if value is UNDEFINED:
        return None
    assert isinstance(value, str)
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)


def _put(d: dict[str, Any], key: str, entry: dict[str, Any], src: str) -> None:
    if src in entry:
        d[key] = entry[src]


def reference_context(entries: list[dict[str, Any]], leaf_id: str) -> dict[str, Any]:
    by_id = {e["id"]: e for e in entries}
    path: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = by_id[leaf_id]
    while cur is not None:
        path.insert(0, cur)
        parent = cur.get("parentId")
        cur = by_id.get(parent) if parent else None
    thinking: Any = "off"
    model: dict[str, Any] | None = None
    compaction: dict[str, Any] | None = None
    for e in path:
        if e["type"] == "thinking_level_change":
            thinking = e.get("thinkingLevel")
        elif e["type"] == "model_change":
            model = {}
            _put(model, "provider", e, "provider")
            _put(model, "modelId", e, "modelId")
        elif e["type"] == "message" and e["message"].get("role") == "assistant":
            model = {}
            _put(model, "provider", e["message"], "provider")
            _put(model, "modelId", e["message"], "model")
        elif e["type"] == "compaction":
            compaction = e

    messages: list[Any] = []

    def emit(e: dict[str, Any]) -> None:
        stamp = js_ms(e.get("timestamp", UNDEFINED))
        if e["type"] == "message":
            messages.append(e["message"])
        elif e["type"] == "custom_message":
            m: dict[str, Any] = {"role": "custom"}
            for k in ("customType", "content", "display", "details"):
                _put(m, k, e, k)
            m["timestamp"] = stamp
            messages.append(m)
        elif e["type"] == "branch_summary" and e.get("summary"):
            m = {"role": "branchSummary", "summary": e["summary"]}
            _put(m, "fromId", e, "fromId")
            m["timestamp"] = stamp
            messages.append(m)

    if compaction is None:
        for e in path:
            emit(e)
    else:
        m = {"role": "compactionSummary"}
        _put(m, "summary", compaction, "summary")
        _put(m, "tokensBefore", compaction, "tokensBefore")
        m["timestamp"] = js_ms(compaction.get("timestamp", UNDEFINED))
        messages.append(m)
        idx = next(i for i, e in enumerate(path) if e is compaction)
        found = False
        for e in path[:idx]:
            if e["id"] == compaction.get("firstKeptEntryId"):
                found = True
            if found:
                emit(e)
        for e in path[idx + 1 :]:
            emit(e)
    return {"messages": messages, "model": model, "thinking_level": thinking}
