-- 0002_search: full-text search (FTS5, BM25-ranked) over what people look for in old
-- sessions: the flattened text of messages, and the summaries of compaction and
-- branch-summary turns. Triggers keep both indexes in sync on every write (turns are
-- immutable, but gc deletes rows and repairs may rewrite them, so deletes and updates
-- are handled too), and this migration indexes the rows written before it.
-- FTS5 is SQLite-only; search is an extra, the core tables stay portable.

-- Index of messages.text (rowid = messages.id). External content: the text is
-- stored once, in messages; the index points at it. FTS5 expects every row of its
-- content table to be indexed, so messages without text are indexed as empty.
create virtual table messages_fts using fts5(
    text,
    content = 'messages',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Index of turns.summary (rowid = turns.id) for the turns that have one. It keeps
-- its own copy of the summary: summaries are few and short, while an external-content
-- index over turns would need an (empty) entry for every turn.
create virtual table summaries_fts using fts5(
    summary,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- An external-content index must be given the exact old value to forget a row.
create trigger messages_fts_after_insert after insert on messages
begin
    insert into messages_fts (rowid, text) values (new.id, new.text);
end;

create trigger messages_fts_after_delete after delete on messages
begin
    insert into messages_fts (messages_fts, rowid, text) values ('delete', old.id, old.text);
end;

create trigger messages_fts_after_update after update of text on messages
begin
    insert into messages_fts (messages_fts, rowid, text) values ('delete', old.id, old.text);
    insert into messages_fts (rowid, text) values (new.id, new.text);
end;

create trigger summaries_fts_after_insert after insert on turns
when new.summary is not null
begin
    insert into summaries_fts (rowid, summary) values (new.id, new.summary);
end;

create trigger summaries_fts_after_delete after delete on turns
when old.summary is not null
begin
    delete from summaries_fts where rowid = old.id;
end;

create trigger summaries_fts_after_update after update of summary on turns
begin
    delete from summaries_fts where rowid = old.id;
    insert into summaries_fts (rowid, summary)
        select new.id, new.summary where new.summary is not null;
end;

-- Rows written before this migration.
insert into messages_fts (messages_fts) values ('rebuild');
insert into summaries_fts (rowid, summary) select id, summary from turns where summary is not null;
