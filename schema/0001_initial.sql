-- 0001_initial: sessions as trees of immutable turns, their messages, and the path
-- values computed once per turn at append time so that context assembly and status
-- cost O(context) or O(1) instead of O(history). Integer keys join; text ids (uid)
-- are the public ids. SQL kept portable (no SQLite-only features in the tables).

-- Settings of this database, e.g. which token counter wrote the stored counts.
create table settings (
    key text primary key,
    value text not null
);

-- One conversation tree.
create table sessions (
    id integer primary key,
    uid text not null unique,              -- public session id
    cwd text,
    title text,
    created_utc text not null,
    updated_utc text not null,             -- last append or navigation
    active_leaf_id integer references turns(id),  -- persisted leaf; NULL = before the first turn
    parent_session_id integer references sessions(id),  -- forks and sub-agents
    fork_turn_id integer references turns(id),           -- the parent session's turn this one forks from
    source_format text,                    -- pi | ndjson | claude_code | codex | NULL (native)
    source_path text,
    source_id text,                        -- the transcript's own session id (idempotent re-import)
    source_version integer,
    header_json text,                      -- header fields without a column, for lossless export
    flush_epoch integer,                   -- memory flush: compaction epoch of the last flush (NULL: never)
    last_seq integer not null default -1   -- seq of the newest turn (the next one is last_seq + 1)
);
create unique index sessions_source on sessions (source_format, source_id);

-- One node of a session tree. Never updated once written.
create table turns (
    id integer primary key,
    session_id integer not null references sessions(id),
    uid text not null,                     -- public id: the source entry id, or generated
    parent_id integer references turns(id),-- NULL for a root
    seq integer not null,                  -- append order within the session
    kind text not null,                    -- pi v3 entry type; unknown types are kept as given
    created_utc text,                      -- the entry's "timestamp" (ISO 8601) when it is a string
    -- path values, computed from the parent at append time:
    depth integer not null,                -- 0 for a root
    tokens integer not null,               -- tokens this turn adds to a context (compaction: its summary)
    path_tokens integer not null,          -- sum of `tokens` root..this turn, compactions excluded
    context_tokens integer not null,       -- tokens of the context assembled with this turn as leaf
    compaction_id integer references turns(id),  -- nearest compaction on the path (self included)
    compaction_count integer not null,     -- compactions on the path (self included)
    active_model_json text,                -- model in effect: {"provider", "modelId"} (keys as the entry had them)
    active_thinking_level text,            -- thinking level in effect ('off' by default)
    run_start_seq integer not null,        -- first seq of the chain of seq-consecutive parent links ending here
    run_parent_id integer references turns(id),  -- parent of that chain's first turn
    -- entry payload: keys of the entry that have no column, and the source line's
    -- differences from the stored entry (absent keys, unresolvable parent ids):
    extra_json text,
    source_patch_json text,
    -- compaction and branch_summary:
    summary text,
    first_kept_uid text,                   -- firstKeptEntryId as written
    first_kept_turn_id integer references turns(id),  -- resolved, only when it is an ancestor
    tokens_before integer,
    tokens_after integer,
    trigger text,                          -- manual | auto
    layer text,                            -- prune | summarize | full
    custom_instruction text,
    messages_compacted integer,
    details_json text,                     -- compaction/branch_summary/custom_message details
    from_hook integer,
    from_uid text,                         -- branch_summary fromId as written
    -- custom, custom_message, model_change, thinking_level_change, label, session_info:
    custom_type text,
    display integer,
    data_json text,
    provider text,
    model_id text,
    thinking_level text,
    target_uid text,
    label text,
    name text
);
create unique index turns_session_uid on turns (session_id, uid);
create unique index turns_session_seq on turns (session_id, seq);
create index turns_parent on turns (parent_id);
-- Partial: only label turns pay for it (every other append leaves it untouched).
create index turns_labels on turns (session_id, target_uid) where kind = 'label';

-- The messages a turn carries (one for pi entries; several when a caller appends a
-- whole exchange at once). `custom_message` turns keep their content here too.
create table messages (
    id integer primary key,
    turn_id integer not null references turns(id),
    idx integer not null,                  -- order within the turn
    role text,
    content_kind text,                     -- how `content` is stored: string | text_block | json | bash_output | NULL (absent)
    content_json text,                     -- the content as JSON when content_kind = 'json'
    text text,                             -- flattened text (text blocks joined by newlines)
    tokens integer not null,               -- counted when written (settings.token_counter)
    tool_call_id text,
    tool_name text,
    is_error integer,
    provider text,
    model text,
    api text,
    stop_reason text,
    timestamp_ms integer,                  -- the message's own epoch-ms timestamp
    input_tokens integer,                  -- provider-reported usage (copied from usage)
    output_tokens integer,
    cache_read_tokens integer,
    cache_write_tokens integer,
    total_tokens integer,
    cost real,                             -- usage.cost.total
    extra_json text                        -- message keys without a column (usage, details, ...)
);
create unique index messages_turn_idx on messages (turn_id, idx);
create index messages_tool on messages (tool_name) where tool_name is not null;
