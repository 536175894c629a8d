-- 0020_sync: what `nexus-store sync` has read from each source, so that a sync costs
-- what changed (one stat for an unchanged file, the new bytes of a grown one, the new
-- rows of an OpenClaw session), and the lineage of OpenClaw session windows.

-- One row per source read by sync: a transcript file, or one session inside an
-- OpenClaw agent database (the file's own row has member '').
create table sync_sources (
    id integer primary key,
    path text not null,                    -- absolute path of the file
    member text not null default '',       -- '' for a file; an OpenClaw session id inside a database
    kind text not null,                    -- jsonl | openclaw_store | openclaw_session
    format text,                           -- pi | ndjson | claude_code | codex (jsonl)
    device integer,                        -- file identity (st_dev, st_ino) when last read
    inode integer,
    size integer,                          -- st_size when last read
    mtime_ns integer,                      -- st_mtime_ns when last read
    byte_offset integer not null default 0,  -- bytes read and stored: up to the last complete line
    lines integer not null default 0,      -- lines before offset
    tail_sha256 text,                      -- SHA-256 of the (up to 4,096) bytes before offset
    last_seq integer,                      -- openclaw_session: the last transcript_events.seq stored
    state_json text,                       -- what a read from offset needs (header, parser state)
    session_id integer references sessions(id) on delete set null,  -- the session it fills
    status text not null,                  -- ok | not_transcript | error
    message text,                          -- why, for not_transcript and error
    synced_utc text not null               -- when it was last read
);
create unique index sync_sources_path on sync_sources (path, member);

-- How an OpenClaw session window follows an earlier one (its session_windows row):
-- the conversation continues across resets, rollovers, forks, rewinds and compactions.
-- sessions.parent_session_id points at the earlier window's session once both are stored.
create table session_lineage (
    session_id integer primary key references sessions(id) on delete cascade,
    previous_source_id text,               -- session_windows.previous_session_id
    reason text,                           -- initial | reset | rollover | fork | rewind | switch | recovery | compaction
    session_key text,                      -- OpenClaw's logical session key (agent:main:...)
    source_path text                       -- the openclaw-agent.sqlite it was read from
);
create index session_lineage_previous on session_lineage (previous_source_id);
