"""The offline summarizer: a checkpoint built from the messages themselves, no model.

`ExtractiveSummarizer` fills the same sections an LLM is asked for — goal,
constraints & preferences, progress (done / in progress / blocked), key decisions,
next steps, critical context, files read / modified — by reading what is already
there: the user's requests and stated rules, the assistant's statements of what it
did or decided, the tool calls that read or changed files, and the errors tools
reported. It is deterministic (same input, same text), so compaction works and
tests run with no network.

A summary is a `_Checkpoint` (lists of items per section) rendered as Markdown.
An earlier summary is parsed back into one and updated: accumulating sections
(goal, constraints, done, decisions, context, files) keep earlier items and add new
ones; state sections (in progress, blocked, next steps) are replaced when the new
messages say something, else carried. Text of an earlier summary that is not in
these sections (an LLM's prose, say) is kept verbatim under "Earlier Notes".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_store.blocks import content_text, tool_calls
from nexus_store.compaction.prompts import DEFAULT_MAX_TOKENS
from nexus_store.compaction.summary_text import file_lists

__all__ = ["SECTION_TITLES", "ExtractiveSummarizer"]

SECTION_TITLES = (
    "Goal",
    "Constraints & Preferences",
    "Progress",
    "Key Decisions",
    "Next Steps",
    "Critical Context",
    "Files",
)
"""Top-level headings of every extractive summary, in order."""

_ITEM_CHARS = 240
_CAPS = {
    "goal": 6,
    "constraints": 12,
    "done": 25,
    "in_progress": 4,
    "blocked": 6,
    "decisions": 12,
    "next_steps": 6,
    "critical": 14,
}
_ACCUMULATE = ("goal", "constraints", "done", "decisions", "critical")
_STATE = ("in_progress", "blocked", "next_steps")

_CONSTRAINT_RE = re.compile(
    r"\b(must|mustn't|don't|do not|never|always|prefer|please use|make sure|avoid|"
    r"without|only use|should not|shouldn't|no more than|at most|at least|required?)\b",
    re.IGNORECASE,
)
_DECISION_RE = re.compile(
    r"\b(decided|decide to|i'll use|we'll use|i will use|we will use|going with|go with|"
    r"chose|choosing|instead of|rather than|switch(?:ed)? to|opted|settled on)\b",
    re.IGNORECASE,
)
_DONE_RE = re.compile(
    r"\b(done|fixed|implemented|added|created|completed|finished|updated|refactored|"
    r"removed|renamed|wrote|tests? pass(?:es|ed)?|all tests pass|resolved|works now)\b",
    re.IGNORECASE,
)
_NEXT_RE = re.compile(
    r"\b(next,? i|next step|next,? we|then i'll|then we'll|todo|to do:|remaining|"
    r"still need|i'll now|i will now|let me now|still to do|afterwards)\b",
    re.IGNORECASE,
)
_TRIVIAL_RE = re.compile(
    r"^(ok(ay)?|yes|no|y|n|thanks?( you)?|thx|continue|go on|go ahead|sure|great|nice|"
    r"please continue|proceed|do it|lgtm)[.!]*$",
    re.IGNORECASE,
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])|\n+")
_HEADING_RE = re.compile(r"^(#{2,3})\s+(.+?)\s*$")
_BULLET_RE = re.compile(r"^\s*(?:[-*]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)(.*)$")
_FILE_BLOCK_RE = re.compile(r"<(read-files|modified-files)>\n(.*?)\n</\1>", re.DOTALL)

_HEADINGS = {
    "goal": "goal",
    "goals": "goal",
    "constraints & preferences": "constraints",
    "constraints and preferences": "constraints",
    "constraints": "constraints",
    "done": "done",
    "in progress": "in_progress",
    "blocked": "blocked",
    "key decisions": "decisions",
    "decisions": "decisions",
    "next steps": "next_steps",
    "critical context": "critical",
    "read": "files_read",
    "files read": "files_read",
    "modified": "files_modified",
    "files modified": "files_modified",
    "progress": "progress",
    "files": "files",
    "earlier notes": "earlier",
}


@dataclass
class _Checkpoint:
    """Items per section; the parsed form of a summary."""

    items: dict[str, list[str]] = field(
        default_factory=lambda: {key: [] for key in (*_CAPS, "files_read", "files_modified")}
    )
    earlier: list[str] = field(default_factory=list)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _ITEM_CHARS else text[: _ITEM_CHARS - 1].rstrip() + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]


def _dedupe(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _keep_recent(items: list[str], cap: int, *, keep_first: bool = False) -> list[str]:
    items = _dedupe(items)
    if len(items) <= cap:
        return items
    if keep_first:
        return [items[0], *items[len(items) - cap + 1 :]]
    return items[len(items) - cap :]


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _extract(messages: Sequence[Mapping[str, Any]]) -> _Checkpoint:
    """Read one span of messages into a checkpoint (no earlier summary involved)."""
    cp = _Checkpoint()
    items = cp.items
    asks: list[str] = []
    errors: list[tuple[str, str]] = []  # (tool, first line), in order
    last_success: dict[str, int] = {}
    last_error_at: dict[str, int] = {}
    pending_writes: dict[str, tuple[str, str]] = {}  # toolCallId -> (tool, path)
    ended_done = False
    for index, msg in enumerate(messages):
        role = msg.get("role")
        if role == "user":
            text = content_text(msg.get("content"), sep="\n").strip()
            if not text:
                continue
            sentences = _sentences(text)
            head = sentences[0] if sentences else text
            if not _TRIVIAL_RE.match(head):
                asks.append(_clip(head))
            items["constraints"].extend(_clip(s) for s in sentences if _CONSTRAINT_RE.search(s))
            ended_done = False
        elif role == "assistant":
            sentences = _sentences(content_text(msg.get("content"), sep="\n"))
            items["decisions"].extend(_clip(s) for s in sentences if _DECISION_RE.search(s))
            done = [_clip(s) for s in sentences if _DONE_RE.search(s)]
            items["done"].extend(done)
            items["next_steps"].extend(
                _clip(s) for s in sentences if _NEXT_RE.search(s) and not _DONE_RE.search(s)
            )
            calls = tool_calls(msg.get("content"))
            for call in calls:
                args = call.get("arguments")
                path = args.get("path") if isinstance(args, Mapping) else None
                name = call.get("name")
                if name in ("write", "edit") and isinstance(path, str) and path:
                    pending_writes[str(call.get("id"))] = (str(name), path)
            ended_done = bool(done) and not calls
        elif role == "toolResult":
            name = str(msg.get("toolName") or "tool")
            call_id = str(msg.get("toolCallId"))
            if msg.get("isError"):
                line = _clip(_first_line(content_text(msg.get("content"), sep="\n")) or "error")
                errors.append((name, line))
                last_error_at[name] = index
                pending_writes.pop(call_id, None)
            else:
                last_success[name] = index
                write = pending_writes.pop(call_id, None)
                if write is not None:
                    verb = "Wrote" if write[0] == "write" else "Edited"
                    items["done"].append(f"{verb} `{write[1]}`")
        elif role == "bashExecution":
            command = _clip(str(msg.get("command") or ""))
            code = msg.get("exitCode")
            if isinstance(code, int) and code != 0:
                output = _first_line(str(msg.get("output") or "")) or f"exit code {code}"
                errors.append(("bash", _clip(f"`{command}` exited {code}: {output}")))
                last_error_at["bash"] = index
            elif command:
                items["critical"].append(f"User ran `{command}`")
                last_success["bash"] = index
        elif role == "custom":
            text = content_text(msg.get("content"), sep="\n").strip()
            if text:
                items["critical"].append(_clip(f"Note: {_first_line(text)}"))
        elif role in ("branchSummary", "compactionSummary"):
            summary = msg.get("summary")
            if isinstance(summary, str) and summary.strip():
                label = "Branch explored earlier" if role == "branchSummary" else "Earlier summary"
                items["critical"].append(_clip(f"{label}: {_first_line(summary)}"))

    if asks:
        items["goal"] = [asks[0], *asks[1:]]
        if not ended_done:
            items["in_progress"] = [asks[-1]]
    for name, line in errors:
        items["critical"].append(f"Error from `{name}`: {line}")
    unresolved = [
        (name, line)
        for name, line in errors
        if last_success.get(name, -1) < last_error_at.get(name, -1)
    ]
    items["blocked"] = [f"`{name}` failing: {line}" for name, line in unresolved]
    if not items["next_steps"] and items["in_progress"]:
        items["next_steps"] = [f"Continue: {items['in_progress'][0]}"]
    files = file_lists(messages)
    items["files_read"] = files["readFiles"]
    items["files_modified"] = files["modifiedFiles"]
    return cp


def _parse(summary: str) -> _Checkpoint:
    """Parse a summary (ours, or any Markdown) back into a checkpoint."""
    cp = _Checkpoint()
    for match in _FILE_BLOCK_RE.finditer(summary):
        paths = [p.strip() for p in match.group(2).splitlines() if p.strip()]
        key = "files_read" if match.group(1) == "read-files" else "files_modified"
        cp.items[key].extend(paths)
    text = _FILE_BLOCK_RE.sub("", summary)
    section: str | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        heading = _HEADING_RE.match(line.strip())
        if heading:
            name = heading.group(2).strip().strip("*").strip().casefold()
            section = _HEADINGS.get(name)
            if section is not None:
                continue
            cp.earlier.append(line)
            continue
        if section in (None, "earlier", "progress", "files"):
            if line.strip() or cp.earlier:
                cp.earlier.append(line)
            continue
        bullet = _BULLET_RE.match(line)
        value = (bullet.group(1) if bullet else line).strip()
        if not value or value.casefold() in ("(none)", "none", "n/a"):
            continue
        cp.items[section].append(value)
    while cp.earlier and not cp.earlier[-1].strip():
        cp.earlier.pop()
    return cp


def _combine(old: _Checkpoint, new: _Checkpoint) -> _Checkpoint:
    """Update ``old`` with ``new``: accumulate history, replace state when new says some."""
    out = _Checkpoint()
    for key in _ACCUMULATE:
        out.items[key] = _keep_recent(
            [*old.items[key], *new.items[key]], _CAPS[key], keep_first=key == "goal"
        )
    for key in _STATE:
        chosen = new.items[key] if new.items[key] else old.items[key]
        out.items[key] = _keep_recent(list(chosen), _CAPS[key])
    done = {item.casefold() for item in out.items["done"]}
    out.items["in_progress"] = [i for i in out.items["in_progress"] if i.casefold() not in done]
    modified = sorted({*old.items["files_modified"], *new.items["files_modified"]})
    read = sorted({*old.items["files_read"], *new.items["files_read"]} - set(modified))
    out.items["files_read"], out.items["files_modified"] = read, modified
    out.earlier = [*old.earlier, *([""] if old.earlier and new.earlier else []), *new.earlier]
    return out


def _render(cp: _Checkpoint, *, max_chars: int) -> str:
    items = cp.items

    def bullets(values: list[str], prefix: str = "- ", empty: str | None = "(none)") -> list[str]:
        if not values:
            return [f"- {empty}"] if empty is not None else []
        return [f"{prefix}{v}" for v in values]

    lines = ["## Goal", *bullets(items["goal"], empty="(not stated)"), ""]
    lines += ["## Constraints & Preferences", *bullets(items["constraints"]), ""]
    lines += ["## Progress", "### Done", *bullets(items["done"], "- [x] ")]
    lines += ["### In Progress", *bullets(items["in_progress"], "- [ ] ")]
    lines += ["### Blocked", *bullets(items["blocked"]), ""]
    lines += ["## Key Decisions", *bullets(items["decisions"]), ""]
    steps = [f"{i}. {step}" for i, step in enumerate(items["next_steps"], 1)]
    lines += ["## Next Steps", *(steps or ["- (none)"]), ""]
    lines += ["## Critical Context", *bullets(items["critical"]), ""]
    lines += ["## Files", "### Read", *bullets(items["files_read"])]
    lines += ["### Modified", *bullets(items["files_modified"])]
    if cp.earlier:
        earlier = "\n".join(cp.earlier).strip()
        if len(earlier) > max_chars:
            earlier = "[… earlier notes shortened …]\n" + earlier[len(earlier) - max_chars :]
        lines += ["", "## Earlier Notes", earlier]
    return "\n".join(lines).strip()


class ExtractiveSummarizer:
    """Deterministic, offline summarizer that extracts a checkpoint from the messages.

    Example:
        >>> s = ExtractiveSummarizer().summarize(
        ...     [{"role": "user", "content": "Fix the login bug. Never touch the db schema."}]
        ... )
        >>> "- Fix the login bug." in s and "Never touch the db schema." in s
        True
    """

    name = "extractive"

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        instructions: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> str:
        """Extract a checkpoint from ``messages``, updating ``previous_summary``.

        Args:
            messages: Agent messages in order.
            previous_summary: An earlier summary (this summarizer's or any Markdown);
                its sections are kept and updated, other text is carried verbatim.
            instructions: A focus from the user; recorded under Critical Context.
            max_tokens: Bounds the carried earlier notes (about 2 characters per token
                of budget); the extracted sections are bounded by fixed item caps.

        Returns:
            The summary in Markdown with every section present.
        """
        new = _extract(messages)
        if instructions and instructions.strip():
            new.items["critical"].insert(0, _clip(f"Focus requested: {instructions.strip()}"))
        cp = (
            _combine(_parse(previous_summary), new)
            if previous_summary
            else _combine(_Checkpoint(), new)
        )
        return _render(cp, max_chars=max(200, max_tokens * 2))

    def merge(self, summaries: Sequence[str], *, instructions: str | None = None) -> str:
        """Merge partial summaries (oldest first) section by section.

        Args:
            summaries: Partial summaries, oldest first.
            instructions: A focus from the user; recorded under Critical Context.

        Returns:
            One summary in the same format.
        """
        cp = _Checkpoint()
        for summary in summaries:
            cp = _combine(cp, _parse(summary))
        if instructions and instructions.strip():
            focus = _clip(f"Focus requested: {instructions.strip()}")
            if focus.casefold() not in {i.casefold() for i in cp.items["critical"]}:
                cp.items["critical"].insert(0, focus)
        return _render(cp, max_chars=8192)
