-- 0010_engine_sessions: what a context-engine host (OpenClaw, through `nexus-store serve`)
-- needs to keep across processes (rows go with their session; gc clears turn_id).
-- OpenClaw builds a new engine for every logical turn
-- and retries a turn commit from its outbox after a crash, so the host's session keys
-- and the commits already applied live in the database, never in a process.

-- A host's session key (OpenClaw's sessionKey) -> the nexus_store session it writes.
create table engine_sessions (
    id integer primary key,
    host text not null,                    -- 'openclaw'
    session_key text not null,             -- the host's stable key (sessionKey, else its sessionId)
    session_id integer not null references sessions(id) on delete cascade,
    host_session_id text,                  -- the host's sessionId last seen for this key
    parent_key text,                       -- sub-agents: the parent's session_key
    context_mode text,                     -- sub-agents: 'fork' or 'isolated'
    ended_reason text,                     -- sub-agents: why it ended (completed, deleted, ...)
    created_utc text not null,
    updated_utc text not null
);
create unique index engine_sessions_key on engine_sessions (host, session_key);
create index engine_sessions_session on engine_sessions (session_id);

-- One row per accepted turn commit, keyed by the host's advancement key: a retried
-- commit finds its row and writes nothing.
create table turn_commits (
    id integer primary key,
    advancement_key text not null unique,
    session_id integer not null references sessions(id) on delete cascade,
    turn_id integer references turns(id) on delete set null,  -- the turn written (NULL: nothing to store)
    messages integer not null,             -- messages in the committed range
    committed_utc text not null
);
create index turn_commits_session on turn_commits (session_id);
