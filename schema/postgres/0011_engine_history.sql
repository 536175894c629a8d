-- 0011_engine_history (PostgreSQL): the same columns as schema/0011_engine_history.sql.
alter table engine_sessions add column source_path text;
alter table engine_sessions add column source_seq bigint;
