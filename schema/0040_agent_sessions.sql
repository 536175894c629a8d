-- 0040_agent_sessions: what the OpenAI Agents SDK sessions (nexus_store.openai_agents)
-- keep beside the turn tree. A named branch is a pointer at a leaf, so creating one
-- copies nothing; each SDK item's type and tool name sit beside its turn, so tool usage
-- and user-turn numbers are a SQL query over a path; the usage a Runner reported is kept
-- per user turn in the same columns messages use for provider usage. Deleting a session
-- or a turn (gc) takes these rows with it.

-- Named branches of a session (AdvancedSQLiteSession's branch ids). A deleted branch
-- keeps its row, so its name stays reserved and its turns stay in the tree.
create table agent_branches (
    id integer primary key,
    session_id integer not null references sessions(id) on delete cascade,
    name text not null,                    -- the branch id ('main', or as created)
    leaf_turn_id integer references turns(id) on delete set null,  -- tip; NULL = empty
    base_turn_id integer references turns(id) on delete set null,  -- created below this turn
    created_utc text not null,
    deleted_utc text                       -- set by delete_branch (NULL: live)
);
create unique index agent_branches_name on agent_branches (session_id, name);

-- One row per turn written from an SDK item: how AdvancedSQLiteSession classifies it.
create table agent_items (
    turn_id integer primary key references turns(id) on delete cascade,
    item_type text not null,               -- user | assistant | the item's "type" | other
    tool_name text                         -- the tool a call names (namespace-qualified)
);

-- Usage a Runner result reported for one user turn of one branch (store_run_usage).
create table agent_usage (
    id integer primary key,
    session_id integer not null references sessions(id) on delete cascade,
    branch text not null,                  -- agent_branches.name
    turn_id integer not null references turns(id) on delete cascade,  -- the user message's turn
    recorded_utc text not null,
    requests integer not null,
    input_tokens integer not null,
    output_tokens integer not null,
    cache_read_tokens integer,             -- input_tokens_details.cached_tokens
    reasoning_tokens integer,              -- output_tokens_details.reasoning_tokens
    total_tokens integer not null,
    input_tokens_details_json text,
    output_tokens_details_json text
);
create unique index agent_usage_turn on agent_usage (session_id, branch, turn_id);
create index agent_usage_turn_id on agent_usage (turn_id);
