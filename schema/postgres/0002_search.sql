-- 0002_search: full-text search over message text and summaries (SQLite: FTS5 in
-- schema/0002_search.sql). PostgreSQL indexes the same text with GIN indexes on
-- tsvector expressions: nothing to keep in sync (no triggers, no copy of the text),
-- and rows written before this migration are indexed by the index builds themselves.
-- The 'simple' configuration lower-cases words and does not stem them, close to
-- FTS5's unicode61 tokenizer.

create index messages_text_search on messages
    using gin (to_tsvector('simple', coalesce(text, '')));

create index turns_summary_search on turns
    using gin (to_tsvector('simple', summary))
    where summary is not null;
