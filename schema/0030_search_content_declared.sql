-- 0030_search_content_declared: declare the message index so that sqlite-utils and
-- Datasette recognise it (issue 15, item 11). They find a table's FTS index by the text
-- `content="messages"` in its declaration; 0002 wrote `content = 'messages'`, which
-- FTS5 reads the same but the tools do not, so `sqlite-utils search sessions.db
-- messages word` said the table was "not configured for full-text search". The index
-- is re-declared with the same columns, tokenizer and triggers, and rebuilt from
-- messages (its content is derived; nothing is lost).

drop trigger if exists messages_fts_after_insert;
drop trigger if exists messages_fts_after_delete;
drop trigger if exists messages_fts_after_update;
drop table if exists messages_fts;

-- Index of messages.text (rowid = messages.id). External content: the text is
-- stored once, in messages; the index points at it. FTS5 expects every row of its
-- content table to be indexed, so messages without text are indexed as empty.
create virtual table messages_fts using fts5(
    text,
    content="messages",
    content_rowid="id",
    tokenize='unicode61 remove_diacritics 2'
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

-- Index the rows already stored.
insert into messages_fts (messages_fts) values ('rebuild');
