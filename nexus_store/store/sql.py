"""The store's multi-line SQL, each statement with a comment on its shape.

Walking a path uses *runs*: a run is a chain of turns whose seq numbers follow one
another (each turn the child of the previous seq), which is how a conversation is
written. Every turn stores the first seq of its run and the parent of that first
turn, so the path from a leaf to the root is a handful of seq ranges, one per
branch point, found by a recursive CTE over runs; the turns themselves are then
read by index range scans. The cost follows the number of turns returned, plus one
step per branch point, never the depth of the history above the context.
"""

from __future__ import annotations

import functools

from nexus_store.rows import MESSAGE_COLUMNS
from nexus_store.store.pathvalues import PARENT_COLUMNS

__all__ = [
    "CONTENT_TEXT",
    "CONTEXT_SQL",
    "INSERT_MESSAGE_SQL",
    "INSERT_TURN_SQL",
    "MESSAGES_PER_STATEMENT",
    "MESSAGE_INSERT_COLUMNS",
    "PARENT_BY_UID_SQL",
    "PATH_SQL",
    "PG_CONTEXT_SQL",
    "PG_INSERT_TURN_SQL",
    "PG_PATH_SQL",
    "SESSION_AND_LEAF_SQL",
    "SESSION_AND_PARENT_SQL",
    "SESSION_SQL",
    "TURN_COLUMNS",
    "TURN_SQL",
    "insert_rows_sql",
]

TURN_COLUMNS = (
    "id",
    "session_id",
    "uid",
    "parent_id",
    "seq",
    "kind",
    "created_utc",
    "depth",
    "tokens",
    "path_tokens",
    "context_tokens",
    "compaction_id",
    "compaction_count",
    "active_model_json",
    "active_thinking_level",
    "run_start_seq",
    "run_parent_id",
    "extra_json",
    "source_patch_json",
    "summary",
    "first_kept_uid",
    "first_kept_turn_id",
    "tokens_before",
    "tokens_after",
    "trigger",
    "layer",
    "custom_instruction",
    "messages_compacted",
    "details_json",
    "from_hook",
    "from_uid",
    "custom_type",
    "display",
    "data_json",
    "provider",
    "model_id",
    "thinking_level",
    "target_uid",
    "label",
    "name",
)

INSERT_TURN_SQL = "insert into turns ({}) values ({})".format(
    ", ".join(TURN_COLUMNS), ", ".join("?" for _ in TURN_COLUMNS)
)

# PostgreSQL: one turn whose key may be NULL (then the identity sequence gives it);
# a public id taken in the session inserts nothing and returns no row (an error
# would abort the transaction, and the store retries a generated id within it).
PG_INSERT_TURN_SQL = (
    "insert into turns ({}) values (coalesce(?, nextval(pg_get_serial_sequence('turns', 'id'))), "
    "{}) on conflict (session_id, uid) do nothing returning id"
).format(", ".join(TURN_COLUMNS), ", ".join("?" for _ in TURN_COLUMNS[1:]))

INSERT_MESSAGE_SQL = """
insert into messages (
    turn_id, idx, role, content_kind, content_json, text, tokens, tool_call_id, tool_name,
    is_error, provider, model, api, stop_reason, timestamp_ms, input_tokens, output_tokens,
    cache_read_tokens, cache_write_tokens, total_tokens, cost, extra_json, content_zstd
) values (
    :turn_id, :idx, :role, :content_kind, :content_json, :text, :tokens, :tool_call_id,
    :tool_name, :is_error, :provider, :model, :api, :stop_reason, :timestamp_ms, :input_tokens,
    :output_tokens, :cache_read_tokens, :cache_write_tokens, :total_tokens, :cost, :extra_json,
    :content_zstd
)
"""

# The columns of INSERT_MESSAGE_SQL, in order (appends write those that hold a value).
MESSAGE_INSERT_COLUMNS = ("turn_id", "idx", *MESSAGE_COLUMNS)
# At most this many rows per `insert_rows_sql` statement of messages (23 variables each; SQLite
# allows 32,766 variables per statement, PostgreSQL 65,535).
MESSAGES_PER_STATEMENT = 500


@functools.lru_cache(maxsize=256)
def insert_rows_sql(table: str, columns: tuple[str, ...], rows: int = 1) -> str:
    """``insert into table (columns)`` of ``rows`` rows in one statement (positional values).

    The write path names only the columns that hold a value: a column left out is NULL,
    as no column of ``turns`` or ``messages`` has a default (tests/test_dialect.py), and
    SQLite binds and encodes fewer values (most of a message turn's 44 turn columns are
    NULL; issue 17). One statement is atomic on its own: it writes all its rows or none.
    """
    one = "(" + ", ".join("?" for _ in columns) + ")"
    return "insert into {} ({}) values {}".format(
        table, ", ".join(columns), ", ".join(one for _ in range(rows))
    )


# A session row with its turn count and the public ids of its leaf and fork links.
SESSION_SQL = """
select s.uid, s.cwd, s.title, s.created_utc, s.updated_utc, leaf.uid, parent.uid, fork.uid,
       s.source_format, s.source_path, s.source_id, s.flush_epoch,
       (select count(*) from turns c where c.session_id = s.id)
from sessions s
left join turns leaf on leaf.id = s.active_leaf_id
left join sessions parent on parent.id = s.parent_session_id
left join turns fork on fork.id = s.fork_turn_id
"""

# Turn rows (every column) with the public ids of the parent and nearest compaction;
# callers add a where clause on t.
TURN_SQL = """
select t.id, t.uid, p.uid, t.kind, t.seq, t.created_utc, t.depth, t.tokens, t.path_tokens,
       t.context_tokens, t.compaction_count, c.uid, t.active_model_json,
       t.active_thinking_level, t.extra_json, t.source_patch_json, {fields}
from turns t
left join turns p on p.id = t.parent_id
left join turns c on c.id = t.compaction_id
"""

# The turns of one run (seq range) of the walk, at or below :stop_depth. SQLite's
# planner walks the (session_id, seq) index per run; PostgreSQL's misjudges the
# recursive CTE's size and scans the session, so its form spells out the range scan
# per run (LATERAL; offset 0 keeps it from being flattened back into a join), and it
# has greatest() where SQLite has the scalar two-argument max().
_RUN_TURNS = """join turns t on t.session_id = :session
  and t.seq between max(seg.start_seq, seg.end_seq - (seg.end_depth - :stop_depth))
                and seg.end_seq"""
_PG_RUN_TURNS = """join lateral (
    select * from turns t where t.session_id = :session
    and t.seq between greatest(seg.start_seq, seg.end_seq - (seg.end_depth - :stop_depth))
                  and seg.end_seq
    offset 0) t on true"""

# The runs (seq ranges) on the path from :leaf up to the turn at depth :stop_depth,
# then the turns of those ranges at or below that depth, ordered root first.
# seg.end_depth - (seg.end_seq - seg.start_seq) is the depth of the run's first turn.
_PATH = """
with recursive seg(start_seq, end_seq, end_depth, jump) as (
    select run_start_seq, seq, depth, run_parent_id from turns where id = :leaf
    union all
    select p.run_start_seq, p.seq, p.depth, p.run_parent_id
    from seg join turns p on p.id = seg.jump
    where seg.end_depth - (seg.end_seq - seg.start_seq) > :stop_depth
)
select t.id
from seg {run_turns}
where t.depth >= :stop_depth
order by t.depth
"""
PATH_SQL = _PATH.format(run_turns=_RUN_TURNS)
PG_PATH_SQL = _PATH.format(run_turns=_PG_RUN_TURNS)

# The text a message's decoding reads, over the view `messages_text m` (schema 0065): a
# json message's content is its content_json, so its text (derived from that content,
# for search) is not computed on the read path.
CONTENT_TEXT = "case when m.content_kind = 'json' then null else m.text end"

# The context of :leaf in one query: the runs from the leaf up to the first kept turn
# of the latest compaction (:stop_depth is that turn's depth; the compaction's own
# depth when it keeps nothing before it; 0 without a compaction), the turns of those
# runs that can produce a message, and their messages. The latest compaction
# (:compaction) sorts first: it becomes the compactionSummary message. A forked
# session's roots continue (run_parent_id) at the fork turn of the parent session, so
# the walk follows the fork without the parent's turns being copied (the run's
# turns are looked up in seg.session, the session of the run).
_CONTEXT = """
with recursive seg(session, start_seq, end_seq, end_depth, jump) as (
    select session_id, run_start_seq, seq, depth, run_parent_id from turns where id = :leaf
    union all
    select p.session_id, p.run_start_seq, p.seq, p.depth, p.run_parent_id
    from seg join turns p on p.id = seg.jump
    where seg.end_depth - (seg.end_seq - seg.start_seq) > :stop_depth
)
select t.id, t.uid, t.kind, t.created_utc, t.summary, t.tokens_before, t.from_uid,
       t.custom_type, t.display, t.details_json, t.extra_json,
       m.idx, m.role, m.content_kind, m.content_json, {content_text},
       m.tool_call_id, m.tool_name, m.is_error, m.provider, m.model, m.api, m.stop_reason,
       m.timestamp_ms, m.extra_json, coalesce(m.tokens, t.tokens)
from seg
{run_turns}
left join messages_text m on m.turn_id = t.id
where t.depth >= :stop_depth
  and (t.kind in ('message', 'custom_message', 'branch_summary') or t.id = :compaction)
order by t.id = :compaction desc, t.depth, m.idx
"""
CONTEXT_SQL = _CONTEXT.format(
    content_text=CONTENT_TEXT,
    run_turns="""join turns t on t.session_id = seg.session
  and t.seq between max(seg.start_seq, seg.end_seq - (seg.end_depth - :stop_depth))
                and seg.end_seq""",
)
PG_CONTEXT_SQL = _CONTEXT.format(
    content_text=CONTENT_TEXT,
    run_turns="""join turns t on t.session_id = seg.session
  and t.seq between greatest(seg.start_seq, seg.end_seq - (seg.end_depth - :stop_depth))
                and seg.end_seq""",
)

# (PARENT_COLUMNS, the row of a turn as a parent of new turns, is pathvalues.PathRow's.)
# The session (key, last seq) with the row of the turn a new turn goes under: the
# active leaf, or the turn named by uid. One read per append.
SESSION_AND_LEAF_SQL = (
    f"select s.id, s.last_seq, s.fork_turn_id, {PARENT_COLUMNS} from sessions s "
    "left join turns t on t.id = s.active_leaf_id and t.session_id = s.id "
    "left join turns pc on pc.id = t.compaction_id where s.uid = ?"
)
SESSION_AND_PARENT_SQL = (
    f"select s.id, s.last_seq, s.fork_turn_id, {PARENT_COLUMNS} from sessions s "
    "left join turns t on t.session_id = s.id and t.uid = ? "
    "left join turns pc on pc.id = t.compaction_id where s.uid = ?"
)
PARENT_BY_UID_SQL = (
    f"select {PARENT_COLUMNS} from turns t left join turns pc on pc.id = t.compaction_id "
    "where t.session_id = ? and t.uid = ?"
)
