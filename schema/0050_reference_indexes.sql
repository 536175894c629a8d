-- Indexes on the columns that reference turns (issue 18: gc was quadratic). Deleting a
-- turn makes SQLite look, for each column that references turns, for rows pointing at
-- it; without an index each lookup scanned the table (18 of 19.6 s removing 8.4k
-- turns). gc also finds the turns that link into what it removes through them.
-- Partial where most rows hold NULL, so that appends pay only where the column is set.

-- nearest compaction on the path: set on every turn after a session's first compaction
create index turns_compaction on turns (compaction_id) where compaction_id is not null;
-- parent of a run's first turn: set only where a run starts off its parent's run
create index turns_run_parent on turns (run_parent_id) where run_parent_id is not null;
-- a compaction's first kept turn: set only on compactions
create index turns_first_kept on turns (first_kept_turn_id) where first_kept_turn_id is not null;
-- the sessions whose active leaf or fork point a turn is (one row per session)
create index sessions_active_leaf on sessions (active_leaf_id) where active_leaf_id is not null;
create index sessions_fork_turn on sessions (fork_turn_id) where fork_turn_id is not null;
create index sessions_parent_session on sessions (parent_session_id)
    where parent_session_id is not null;
