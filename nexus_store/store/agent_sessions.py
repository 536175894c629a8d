"""The SQL of the OpenAI Agents SDK sessions: tail reads, named branches, item kinds, usage.

`AgentSessions` is a part over an open `Store` (its connection and ``atomic()``); the
session classes in `nexus_store.openai_agents` are its only callers. Its tables come
from migration ``0040_agent_sessions``:

- ``agent_branches``: a branch name points at a leaf turn, so a branch copies nothing;
- ``agent_items``: the SDK item type and tool name of each turn written from an item,
  so user-turn numbers and tool usage along a path are one query;
- ``agent_usage``: the usage a Runner result reported for one user turn of a branch.

Every path query walks up from a leaf (a recursive CTE), one step per run of
seq-consecutive turns, so its cost follows the path, not the session; `tail` and
`last_user` walk turn by turn and stop early: reading the last N items costs O(N), not
O(history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nexus_store.assemble import build_messages
from nexus_store.store.db import utc_now
from nexus_store.store.sql import CONTENT_TEXT

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["AgentSessions"]

# The columns of a turn and its messages in the order of CONTEXT_SQL (which
# assemble.build_messages reads), over `turns t left join messages_text m`.
MESSAGE_COLUMNS = f"""
t.id, t.uid, t.kind, t.created_utc, t.summary, t.tokens_before, t.from_uid,
t.custom_type, t.display, t.details_json, t.extra_json,
m.idx, m.role, m.content_kind, m.content_json, {CONTENT_TEXT},
m.tool_call_id, m.tool_name, m.is_error, m.provider, m.model, m.api, m.stop_reason,
m.timestamp_ms, m.extra_json, coalesce(m.tokens, t.tokens)
"""

# The last :limit turns of the path ending at :leaf with their messages, oldest first.
TAIL_SQL = f"""
with recursive up(id, parent_id, n) as (
    select id, parent_id, 1 from turns where id = :leaf
    union all
    select t.id, t.parent_id, up.n + 1 from up join turns t on t.id = up.parent_id
    where up.n < :limit
)
select {MESSAGE_COLUMNS}, t.parent_id, t.run_parent_id
from up join turns t on t.id = up.id
left join messages_text m on m.turn_id = t.id
order by t.depth, m.idx
"""

# The runs of the path ending at :leaf inside its session, as a CTE `seg`: a run is a
# seq range of turns each the child of the one before (turns.run_start_seq,
# run_parent_id), so the walk takes one step per run, not per turn, and each run's
# turns are one range scan of the (session_id, seq) index (as the store's PATH_SQL).
PATH_RUNS_CTE = """
with recursive seg(session, start_seq, end_seq, jump) as (
    select session_id, run_start_seq, seq, run_parent_id from turns where id = :leaf
    union all
    select p.session_id, p.run_start_seq, p.seq, p.run_parent_id
    from seg join turns p on p.id = seg.jump and p.session_id = seg.session
)"""

# The turns on the path ending at :leaf that were written from SDK items, as a CTE
# `items`: key, uid, created time, item type, tool name and user-turn number (user
# items counted from the root; items before the first one are turn 0, as in
# AdvancedSQLiteSession), ordered by depth.
PATH_ITEMS_CTE = (
    PATH_RUNS_CTE
    + """,
items as (
    select t.id, t.uid, t.created_utc, a.item_type, a.tool_name, t.depth,
           sum(case when a.item_type = 'user' then 1 else 0 end)
               over (order by t.depth rows unbounded preceding) as user_turn
    from seg join turns t on t.session_id = seg.session
        and t.seq between seg.start_seq and seg.end_seq
    join agent_items a on a.turn_id = t.id
)
"""
)

PATH_ITEMS_SQL = (
    PATH_ITEMS_CTE
    + "select id, uid, created_utc, item_type, tool_name, user_turn from items order by depth"
)

CALL_TYPES = (
    "tool_call",
    "function_call",
    "computer_call",
    "file_search_call",
    "web_search_call",
    "code_interpreter_call",
    "tool_search_call",
    "custom_tool_call",
    "mcp_call",
    "mcp_approval_request",
    "shell_call",
    "apply_patch_call",
)
"""Item types that count as a tool use (AdvancedSQLiteSession.get_tool_usage's list)."""

# Tool uses per tool and user turn on the path: every call item, plus a tool search
# output with no call of its tool in the same turn (a server-side search).
TOOL_USAGE_SQL = (
    PATH_ITEMS_CTE
    + """
select tool_name, count(*), user_turn from (
    select coalesce(tool_name, case when item_type in ('shell_call', 'apply_patch_call')
                                    then item_type end) as tool_name, user_turn
    from items where item_type in ({calls})
    union all
    select o.tool_name, o.user_turn from items o
    where o.item_type = 'tool_search_output'
      and not exists (select 1 from items c where c.user_turn = o.user_turn
                      and c.tool_name = o.tool_name and c.item_type = 'tool_search_call')
) uses
group by tool_name, user_turn
order by user_turn, tool_name
""".replace("{calls}", ", ".join(f"'{t}'" for t in CALL_TYPES))
)

# The usage rows of one branch for the user turns on its path, by user-turn number.
TURN_USAGE_SQL = (
    PATH_ITEMS_CTE
    + """
select i.user_turn, u.requests, u.input_tokens, u.output_tokens, u.total_tokens,
       u.input_tokens_details_json, u.output_tokens_details_json
from items i join agent_usage u on u.turn_id = i.id
where i.item_type = 'user' and u.session_id = :session and u.branch = :branch
order by i.user_turn
"""
)

# The user items on the path ending at :leaf: key, user-turn number and created time,
# by number. Only user items are numbered, by seq: a parent is always appended before
# its children, so seq grows with depth along a path, and numbering needs nothing but
# the (session_id, seq) index; a turn row is read only for an item returned.
USER_TURNS_SQL = (
    PATH_RUNS_CTE
    + """,
users as (
    select t.id, row_number() over (order by t.seq) as user_turn
    from seg join turns t on t.session_id = seg.session
        and t.seq between seg.start_seq and seg.end_seq
    join agent_items a on a.turn_id = t.id and a.item_type = 'user'
)
select u.id, u.user_turn, t.created_utc from users u join turns t on t.id = u.id
"""
)

# The same, only those whose flattened text is like :pattern (lower-cased on both
# sides, so a superset of an ASCII-case-insensitive substring match; the caller checks
# the exact rule on each text part). Only matches come back.
USER_TURNS_LIKE_SQL = (
    USER_TURNS_SQL
    + """where exists (
    select 1 from messages_text m
    where m.turn_id = u.id and lower(m.text) like lower(:pattern) escape '\\')
order by u.user_turn"""
)
USER_TURNS_SQL += "order by u.user_turn"

# How many SDK items and user items the path ending at :leaf holds (index ranges only).
PATH_COUNTS_SQL = (
    PATH_RUNS_CTE
    + """
select count(*), coalesce(sum(case when a.item_type = 'user' then 1 else 0 end), 0)
from seg join turns t on t.session_id = seg.session
    and t.seq between seg.start_seq and seg.end_seq
join agent_items a on a.turn_id = t.id
"""
)

# The latest user item on the path ending at :leaf: a walk up that stops at it, so
# its cost is the distance from the leaf, not the length of the path.
LAST_USER_SQL = """
with recursive up(id, parent_id, is_user) as (
    select t.id, t.parent_id, case when a.item_type = 'user' then 1 else 0 end
    from turns t left join agent_items a on a.turn_id = t.id where t.id = :leaf
    union all
    select t.id, t.parent_id, case when a.item_type = 'user' then 1 else 0 end
    from up join turns t on t.id = up.parent_id left join agent_items a on a.turn_id = t.id
    where up.is_user = 0
)
select id from up where is_user = 1
"""

UPSERT_USAGE_SQL = """
insert into agent_usage (session_id, branch, turn_id, recorded_utc, requests, input_tokens,
    output_tokens, cache_read_tokens, reasoning_tokens, total_tokens,
    input_tokens_details_json, output_tokens_details_json)
values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
on conflict (session_id, branch, turn_id) do update set
    recorded_utc = excluded.recorded_utc, requests = excluded.requests,
    input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
    cache_read_tokens = excluded.cache_read_tokens,
    reasoning_tokens = excluded.reasoning_tokens, total_tokens = excluded.total_tokens,
    input_tokens_details_json = excluded.input_tokens_details_json,
    output_tokens_details_json = excluded.output_tokens_details_json
"""

# Usage sums of a session's live branches, or of one (the second parameter; None: all).
# The cast tells PostgreSQL the type of a parameter it only sees compared with null.
SESSION_USAGE_SQL = """
select sum(u.requests), sum(u.input_tokens), sum(u.output_tokens), sum(u.total_tokens), count(*)
from agent_usage u join agent_branches b on b.session_id = u.session_id and b.name = u.branch
where u.session_id = ? and b.deleted_utc is null and (cast(? as text) is null or u.branch = ?)
"""

BRANCHES_SQL = """
select name, leaf_turn_id, created_utc from agent_branches
where session_id = ? and deleted_utc is null order by created_utc, id
"""


class AgentSessions:
    """The SDK sessions' reads and writes on a `Store`'s database.

    Args:
        store: The open store (its connection, and ``atomic()`` for writes).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def _rows(self, sql: str, params: Any = ()) -> list[Any]:
        return list(self.store.conn.execute(sql, params).fetchall())

    # -- keys ------------------------------------------------------------------------

    def session_row(self, session_id: str) -> tuple[int, int | None, int] | None:
        """``(key, active leaf key, last seq)`` of a session, or None if it does not exist."""
        rows = self._rows(
            "select id, active_leaf_id, last_seq from sessions where uid = ?", [session_id]
        )
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2])

    def turns_after(self, session_key: int, seq: int) -> list[tuple[int, str]]:
        """``(key, uid)`` of the session's turns appended after ``seq``, in order."""
        return [
            (r[0], r[1])
            for r in self._rows(
                "select id, uid from turns where session_id = ? and seq > ? order by seq",
                [session_key, seq],
            )
        ]

    def turn_uid(self, turn_key: int | None) -> str | None:
        """The public id of a turn key (None for None)."""
        if turn_key is None:
            return None
        return str(self._rows("select uid from turns where id = ?", [turn_key])[0][0])

    def turn_key(self, session_id: str, uid: str) -> int:
        """The key of a session's turn, by the public ids of both."""
        rows = self._rows(
            "select t.id from turns t join sessions s on s.id = t.session_id "
            "where s.uid = ? and t.uid = ?",
            [session_id, uid],
        )
        return int(rows[0][0])

    def set_active_leaf(self, session_id: str, leaf_key: int | None) -> None:
        """Move a session's active leaf to a turn of it (None: before the first turn).

        What `Store.navigate` writes, without reading the session back: that read counts
        the session's turns, which made every ``pop_item`` cost O(history).
        """
        self.store.conn.execute(
            "update sessions set active_leaf_id = ?, updated_utc = ? where uid = ?",
            [leaf_key, utc_now(), session_id],
        )

    def parent_key(self, turn_key: int) -> int | None:
        """The parent key of a turn (None for a root)."""
        value = self._rows("select parent_id from turns where id = ?", [turn_key])[0][0]
        return None if value is None else int(value)

    # -- reading items -------------------------------------------------------------------

    def tail(
        self, leaf_key: int, limit: int
    ) -> tuple[list[Any], list[str], list[int], bool] | None:
        """The last ``limit`` messages of the path ending at a leaf, in O(limit).

        Args:
            leaf_key: The leaf's key.
            limit: How many messages (at least 1).

        Returns:
            ``(messages, turn uids, turn keys, complete)``, oldest first; ``complete``
            when no message precedes them. None when the turns walked hold one that is
            not a plain message turn (a compaction, a summary, a custom entry) or reach
            the root of a forked session: the caller then assembles the whole context,
            which handles those.
        """
        rows = self._rows(TAIL_SQL, {"leaf": leaf_key, "limit": limit + 1})
        if any(row[2] != "message" for row in rows):
            return None
        first = rows[0]
        reached_root = first[26] is None
        if reached_root and first[27] is not None:
            return None  # a fork: its context continues in the parent session
        messages, uids, _, _ = build_messages(rows, None)
        if len(messages) < limit and not reached_root:
            return None
        by_uid = {row[1]: row[0] for row in rows}
        keys = [by_uid[uid] for uid in uids]
        complete = reached_root and len(messages) <= limit
        return messages[-limit:], uids[-limit:], keys[-limit:], complete

    def messages_of(self, turn_keys: Sequence[int]) -> dict[int, list[Any]]:
        """The messages of the given message turns, by turn key."""
        found: dict[int, list[Any]] = {}
        for start in range(0, len(turn_keys), 500):
            chunk = list(turn_keys[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            rows = self._rows(
                f"select {MESSAGE_COLUMNS} from turns t left join messages_text m "
                f"on m.turn_id = t.id where t.id in ({marks}) order by t.id, m.idx",
                chunk,
            )
            messages, uids, _, _ = build_messages(rows, None)
            key_of = {row[1]: row[0] for row in rows}
            for message, uid in zip(messages, uids, strict=True):
                found.setdefault(key_of[uid], []).append(message)
        return found

    def path_items(self, leaf_key: int | None) -> list[tuple[int, str, str, str, str | None, int]]:
        """``(key, uid, created, item type, tool name, user turn)`` along a path, root first."""
        if leaf_key is None:
            return []
        return [tuple(r) for r in self._rows(PATH_ITEMS_SQL, {"leaf": leaf_key})]

    def user_turns(
        self, leaf_key: int | None, term: str | None = None
    ) -> list[tuple[int, int, str]]:
        """``(key, user turn, created)`` of the user items on a path, by number.

        Args:
            leaf_key: The path's leaf (None: an empty path).
            term: Only user items whose text may contain this (ASCII case folded;
                the caller checks the exact rule on each text part).
        """
        if leaf_key is None:
            return []
        if term is None:
            rows = self._rows(USER_TURNS_SQL, {"leaf": leaf_key})
        else:
            escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = self._rows(USER_TURNS_LIKE_SQL, {"leaf": leaf_key, "pattern": f"%{escaped}%"})
        return [(r[0], r[1], r[2]) for r in rows]

    def path_counts(self, leaf_key: int | None) -> tuple[int, int]:
        """``(SDK items, user items)`` on a path."""
        if leaf_key is None:
            return 0, 0
        row = self._rows(PATH_COUNTS_SQL, {"leaf": leaf_key})[0]
        return int(row[0]), int(row[1])

    def last_user(self, leaf_key: int | None) -> int | None:
        """The key of the latest user item on a path (None if it has none)."""
        if leaf_key is None:
            return None
        rows = self._rows(LAST_USER_SQL, {"leaf": leaf_key})
        return None if not rows else int(rows[0][0])

    def tool_usage(self, leaf_key: int | None) -> list[tuple[str, int, int]]:
        """``(tool name, uses, user turn)`` along a path, by turn."""
        if leaf_key is None:
            return []
        return [(r[0], r[1], r[2]) for r in self._rows(TOOL_USAGE_SQL, {"leaf": leaf_key})]

    # -- writing items -------------------------------------------------------------------

    def record_items(self, rows: Sequence[tuple[int, str, str | None]]) -> None:
        """Record ``(turn key, item type, tool name)`` for turns written from SDK items."""
        if rows:
            self.store.conn.executemany(
                "insert into agent_items (turn_id, item_type, tool_name) values (?, ?, ?)",
                list(rows),
            )

    # -- branches ------------------------------------------------------------------------

    def branch(self, session_key: int, name: str) -> tuple[int | None, bool] | None:
        """``(tip key, deleted)`` of a branch, or None if the name was never used."""
        rows = self._rows(
            "select leaf_turn_id, deleted_utc from agent_branches where session_id = ? "
            "and name = ?",
            [session_key, name],
        )
        return None if not rows else (rows[0][0], rows[0][1] is not None)

    def add_branch(
        self, session_key: int, name: str, tip: int | None, base: int | None, now: str
    ) -> bool:
        """Name a new branch; False (nothing written) if the name was ever used."""
        if self.branch(session_key, name) is not None:
            return False
        self.store.conn.execute(
            "insert into agent_branches (session_id, name, leaf_turn_id, base_turn_id, "
            "created_utc) values (?, ?, ?, ?, ?)",
            [session_key, name, tip, base, now],
        )
        return True

    def set_tip(self, session_key: int, name: str, tip: int | None) -> None:
        """Point a branch at a new tip."""
        self.store.conn.execute(
            "update agent_branches set leaf_turn_id = ? where session_id = ? and name = ?",
            [tip, session_key, name],
        )

    def live_branches(self, session_key: int) -> list[tuple[str, int | None, str]]:
        """``(name, tip key, created)`` of the branches not deleted, oldest first."""
        return [(r[0], r[1], r[2]) for r in self._rows(BRANCHES_SQL, [session_key])]

    def delete_branch(self, session_key: int, name: str, now: str) -> None:
        """Mark a branch deleted (its name stays reserved; its turns stay) and drop its usage."""
        self.store.conn.execute(
            "update agent_branches set deleted_utc = ? where session_id = ? and name = ?",
            [now, session_key, name],
        )
        self.store.conn.execute(
            "delete from agent_usage where session_id = ? and branch = ?", [session_key, name]
        )

    def reset(self, session_key: int, keep: str, now: str) -> None:
        """Clear a session's SDK view: every branch but ``keep`` deleted, ``keep`` empty."""
        self.store.conn.execute(
            "update agent_branches set deleted_utc = ? where session_id = ? and name != ? "
            "and deleted_utc is null",
            [now, session_key, keep],
        )
        self.set_tip(session_key, keep, None)
        self.store.conn.execute("delete from agent_usage where session_id = ?", [session_key])

    # -- usage ---------------------------------------------------------------------------

    def put_usage(
        self, session_key: int, branch: str, turn_key: int, values: Sequence[Any]
    ) -> None:
        """Record (or replace) the usage of one user turn of a branch.

        ``values``: recorded time, requests, input, output, cache-read, reasoning and
        total tokens, and the two details as JSON text.
        """
        self.store.conn.execute(UPSERT_USAGE_SQL, [session_key, branch, turn_key, *values])

    def drop_usage(self, session_key: int, branch: str, turn_key: int) -> None:
        """Forget the usage of one user turn of a branch (its user item was popped)."""
        self.store.conn.execute(
            "delete from agent_usage where session_id = ? and branch = ? and turn_id = ?",
            [session_key, branch, turn_key],
        )

    def turn_usage(self, session_key: int, branch: str, leaf_key: int | None) -> list[Any]:
        """Usage rows of a branch's user turns on its path, by turn number."""
        if leaf_key is None:
            return []
        return self._rows(
            TURN_USAGE_SQL, {"leaf": leaf_key, "session": session_key, "branch": branch}
        )

    def session_usage(self, session_key: int, branch: str | None) -> Any:
        """Sums of requests, input, output, total tokens and the number of turns."""
        return self._rows(SESSION_USAGE_SQL, [session_key, branch, branch])[0]
