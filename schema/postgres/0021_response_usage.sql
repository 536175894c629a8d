-- 0021_response_usage (PostgreSQL): the same table as schema/0021_response_usage.sql
-- (the turn that carries each Claude Code API response's usage), with a bigint key.
create table response_usage (
    response_key text collate "C" primary key,
    turn_id bigint not null references turns(id) on delete cascade
);
create index response_usage_turn on response_usage (turn_id);

-- OpenClaw reset entries (nexus_store/store/resets.py), as in schema/0021_response_usage.sql.
create index turns_resets on turns (session_id) where kind = 'reset';
