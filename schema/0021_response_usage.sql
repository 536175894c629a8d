-- 0021_response_usage: which stored turn carries the usage of each Claude Code API
-- response, so that usage and cost count once across the store. A resumed Claude Code
-- session copies earlier history (same message id and request id) into a new file: its
-- session stores every copied entry (its context stays whole), but a response whose
-- usage another session already carries gets none in its message (the line's own usage
-- stays in the entry's ccMessage, so nothing is lost).
create table response_usage (
    response_key text primary key,         -- message id, ':' and request id (as written)
    turn_id integer not null references turns(id) on delete cascade  -- the turn counting it
);
create index response_usage_turn on response_usage (turn_id);

-- OpenClaw reset entries start a new context window (nexus_store/store/resets.py): a
-- context assembly looks for them only in sessions that have one, found here at once.
create index turns_resets on turns (session_id) where kind = 'reset';
