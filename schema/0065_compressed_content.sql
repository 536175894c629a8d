-- 0065_compressed_content: large message content is stored zstd-compressed (issue 17:
-- bytes on disk were 1.59x the JSONL). Content of at least 512 bytes of UTF-8 moves from its
-- plain column (`text`, or `content_json` for the kind 'json') into `content_zstd`; a
-- 'json' message's flattened text, which repeated its content, is no longer stored but
-- derived when needed. Columns people filter on stay plain. The SQL functions used here
-- and in the view are registered by every connection nexus_store opens, and by its
-- Datasette and sqlite-utils plugins (nexus_store/store/compression.py says what each
-- does). The message search index now reads its text from the view `messages_text`,
-- so FTS5's snippet(), 'rebuild' and 'integrity-check' see the plain text.
-- One transaction: the UPDATE streams row by row (memory stays bounded whatever the
-- size of the store), and the index is rebuilt from the view at the end.

drop trigger if exists messages_fts_after_insert;
drop trigger if exists messages_fts_after_delete;
drop trigger if exists messages_fts_after_update;
drop table if exists messages_fts;

-- The content of a message whose content is at least 512 bytes, as one zstd frame of its
-- UTF-8 text: `text` for the kinds string, text_block and bash_output, `content_json`
-- for the kind json (that column is then NULL). `nexus_unzstd(content_zstd)` gives it back.
alter table messages add column content_zstd blob;

update messages
set content_zstd = nexus_zstd(case content_kind when 'json' then content_json else text end),
    content_json = null,
    text = case content_kind when 'json' then text end
where content_kind in ('string', 'text_block', 'bash_output', 'json')
  and nexus_is_large(case content_kind when 'json' then content_json else text end);

-- A json message's text is derived from its content; one that differs from what the
-- write path derives (written by hand) is kept as it is.
update messages set text = null
where content_kind = 'json' and text is not null
  and text = nexus_message_text(content_kind, content_json, content_zstd, id);

-- `messages` with its content plain, as it was before this migration: `text` is the text
-- search indexes (stored, decompressed, or derived from a json content).
create view messages_text as
select id, turn_id, idx, role, content_kind,
       coalesce(content_json,
                case when content_kind = 'json' then nexus_unzstd(content_zstd, id) end)
           as content_json,
       coalesce(text, nexus_message_text(content_kind, content_json, content_zstd, id)) as text,
       tokens, tool_call_id, tool_name, is_error, provider, model, api, stop_reason,
       timestamp_ms, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
       total_tokens, cost, extra_json
from messages;

-- Index of messages_text.text (rowid = messages.id). External content: the index keeps
-- no copy of the text and reads it from the view (snippets, rebuild, integrity-check).
create virtual table messages_fts using fts5(
    text,
    content="messages_text",
    content_rowid="id",
    tokenize='unicode61 remove_diacritics 2'
);

-- The triggers give FTS5 the text from the view for the messages the index holds (those
-- up to the watermark of 0060; the store indexes the tail above it in bulk): the new
-- row's after it is written, the old row's (the exact value indexed, which 'delete'
-- needs) before it goes.
create trigger messages_fts_after_insert after insert on messages
when new.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (rowid, text) select id, text from messages_text where id = new.id;
end;

create trigger messages_fts_before_delete before delete on messages
when old.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (messages_fts, rowid, text)
        select 'delete', id, text from messages_text where id = old.id;
end;

create trigger messages_fts_before_update
before update of id, content_kind, content_json, text, content_zstd on messages
when old.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (messages_fts, rowid, text)
        select 'delete', id, text from messages_text where id = old.id;
end;

create trigger messages_fts_after_update
after update of id, content_kind, content_json, text, content_zstd on messages
when new.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (rowid, text) select id, text from messages_text where id = new.id;
end;

-- Every message is indexed now: the watermark moves to the last one.
insert into messages_fts (messages_fts) values ('rebuild');
insert or replace into search_watermark (id, messages_indexed_to)
    select 1, coalesce(max(id), 0) from messages;
