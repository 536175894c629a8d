-- 0011_engine_history: how far an engine session has taken in its host's own transcript.
-- OpenClaw keeps every turn in its own store (openclaw-agent.sqlite), also the turns it
-- ran on its `legacy` engine after an engine error, which were never committed here. The
-- service imports a session's earlier history from that store once, and appends what it
-- finds there beyond this point (reconciliation), so nothing OpenClaw kept is missing
-- and nothing is stored twice.
alter table engine_sessions add column source_path text;     -- the host store read (openclaw-agent.sqlite)
alter table engine_sessions add column source_seq integer;   -- its last transcript seq of host_session_id stored here
