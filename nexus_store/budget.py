"""Fitting an assembled context into a token budget (`ContextEngine.assemble`).

Issue 18 (item 4): the old loop left a tool result without its call, exceeded the
budget when the newest exchange alone was too large, and was quadratic (it summed
and shifted the whole list for every message it dropped). `fit_to_budget` is one
pass over the messages and never separates a tool call from its results.

The context is cut into *units* that are kept or left out whole: a leading
``compactionSummary``; a ``user`` message; an ``assistant`` message together with
the ``toolResult`` messages that follow it; any other message alone (a tool result
with no call before it, too). An *exchange* is a user unit and the units up to the
next user unit. While over budget, in this order:

1. the configured prune view (old tool outputs become a placeholder);
2. whole exchanges are left out from the old end (the newest one stays, and so does
   a leading summary);
3. inside the newest exchange, units after its user message are left out from the
   old end (the newest unit stays);
4. the tool outputs still in view become placeholders, oldest first (protected tools
   excepted);
5. units are left out from the old end until the rest fits, the summary first: the
   result may be empty (a budget of 0), never over budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nexus_store.compaction.prune import PruneConfig, prune_context, pruned_message
from nexus_store.errors import InvalidArgument

__all__ = ["Fitted", "check_budget", "fit_to_budget"]


@dataclass(frozen=True)
class Fitted:
    """A context fitted into a budget.

    Attributes:
        messages: The messages kept, oldest first.
        tokens: Token count of each kept message.
        pruned: Tool outputs shown as a placeholder.
        dropped: Messages left out.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    pruned: int = 0
    dropped: int = 0


def check_budget(token_budget: object) -> int | None:
    """Return a valid token budget (None: no budget).

    Raises:
        InvalidArgument: If it is not None or a whole number >= 0.
    """
    if token_budget is None:
        return None
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise InvalidArgument(
            f"token_budget must be a whole number of tokens (or None for no budget), not "
            f"{token_budget!r} ({type(token_budget).__name__})"
        )
    if token_budget < 0:
        raise InvalidArgument(
            f"token_budget must be 0 or more tokens, not {token_budget}; pass None for no budget"
        )
    return token_budget


def _units(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The index where each unit starts (see the module docstring), ascending."""
    starts: list[int] = []
    open_call = False  # the current unit is an assistant message its results may join
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "toolResult" and open_call:
            continue
        starts.append(index)
        open_call = role == "assistant"
    return starts


def fit_to_budget(
    messages: Sequence[dict[str, Any]],
    tokens: Sequence[int],
    budget: int,
    config: PruneConfig | None = None,
) -> Fitted:
    """Fit a context into ``budget`` tokens (see the module docstring for the order).

    Args:
        messages: The context, oldest first.
        tokens: The stored token count of each message.
        budget: Tokens allowed (>= 0; see `check_budget`).
        config: The prune view's settings (step 1).

    Returns:
        The messages kept, their counts, and how many were pruned and dropped.
    """
    total = sum(tokens)
    if total <= budget:
        return Fitted(messages=list(messages), tokens=list(tokens))
    view = prune_context(messages, tokens, config)
    kept, counts = list(view.messages), list(view.tokens)
    pruned_at = set(view.pruned)
    total = view.tokens_after
    starts = _units(kept)
    sizes = [sum(counts[a:b]) for a, b in zip(starts, [*starts[1:], len(kept)], strict=True)]
    roles = [kept[i].get("role") for i in starts]
    first = 1 if roles and roles[0] == "compactionSummary" else 0
    users = [u for u in range(first, len(starts)) if roles[u] == "user"]
    newest_user = users[-1] if users else first
    # keep[u] is False for a unit left out; `lo` is the oldest unit still in (after the summary)
    keep = [True] * len(starts)
    lo = first
    # 2. whole exchanges from the old end, up to the newest exchange
    for boundary in (*users, newest_user):
        if total <= budget:
            break
        while lo < boundary:
            keep[lo] = False
            total -= sizes[lo]
            lo += 1
    # 3. units of the newest exchange after its user message, keeping the newest unit
    inner = newest_user + 1 if newest_user < len(starts) and roles[newest_user] == "user" else lo
    inner = max(inner, lo)
    while total > budget and inner < len(starts) - 1:
        keep[inner] = False
        total -= sizes[inner]
        inner += 1
    # 4. tool outputs still in view become placeholders, oldest first
    protected = (config or PruneConfig()).all_protected_tools
    if total > budget:
        for u, start in enumerate(starts):
            if not keep[u]:
                continue
            end = starts[u + 1] if u + 1 < len(starts) else len(kept)
            for index in range(start, end):
                message = kept[index]
                if (
                    total <= budget
                    or message.get("role") != "toolResult"
                    or message.get("toolName") in protected
                ):
                    continue
                copy, cost = pruned_message(message)
                if cost < counts[index]:  # (a placeholder already costs no more)
                    total -= counts[index] - cost
                    sizes[u] -= counts[index] - cost
                    kept[index], counts[index] = copy, cost
                    pruned_at.add(index)
    # 5. units from the old end, the summary first, until the rest fits
    for u in range(len(starts)):
        if total <= budget:
            break
        if keep[u]:
            keep[u] = False
            total -= sizes[u]
    out_messages: list[dict[str, Any]] = []
    out_tokens: list[int] = []
    pruned = 0
    for u, start in enumerate(starts):
        if not keep[u]:
            continue
        end = starts[u + 1] if u + 1 < len(starts) else len(kept)
        out_messages.extend(kept[start:end])
        out_tokens.extend(counts[start:end])
        pruned += sum(1 for i in range(start, end) if i in pruned_at)
    return Fitted(
        messages=out_messages,
        tokens=out_tokens,
        pruned=pruned,
        dropped=len(kept) - len(out_messages),
    )
