-- 0003_workspace: the workspace bootstrap files (AGENTS.md, CLAUDE.md, SOUL.md, ...)
-- a session was started with, as they were injected into the system prompt (after
-- the 20,000-character head/tail truncation). A file's content is stored once however
-- many sessions load it; each session records which paths it loaded, when, and
-- whether they were cut. Workspace rows never change: a new load adds rows.

-- Distinct injected file contents, keyed by their SHA-256.
create table workspace_files (
    id integer primary key,
    sha256 text not null unique,           -- hex SHA-256 of content (UTF-8)
    content text not null,                 -- the text as injected (truncated if it was cut)
    chars integer not null                 -- length of content in characters
);

-- The bootstrap files of a session, one row per file per load.
create table session_workspace (
    id integer primary key,
    session_id integer not null references sessions(id),
    load_seq integer not null,             -- 1 for the first load of the session, then 2, ...
    position integer not null,             -- order within the load (the system prompt order)
    path text not null,                    -- path relative to the workspace dir (as given)
    file_id integer not null references workspace_files(id),
    truncated integer not null,            -- 1 when the file was cut to max_chars
    original_length integer not null,      -- characters of the file before truncation
    original_sha256 text,                  -- SHA-256 of the file before truncation
    max_chars integer,                     -- the character limit applied
    loaded_utc text not null               -- when the load was recorded
);
create unique index session_workspace_load on session_workspace (session_id, load_seq, position);
create index session_workspace_file on session_workspace (file_id);
