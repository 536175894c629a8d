-- 0060_search_watermark: index messages for search in bulk, not one FTS segment per commit
-- (issue 17). With one commit per turn the per-row trigger made FTS5 write a new segment
-- on every commit: 3.94 ms per turn at WAL FULL with it, 1.36 ms without. From here on
-- `messages_fts` holds exactly the messages whose id is at or below a watermark; the
-- messages above it (the tail: what was appended since the last drain, by the store or
-- by any other writer such as sqlite-utils or Datasette) are indexed together, with one
-- statement, when the tail grows past a threshold at a commit, before any search the
-- store runs, and when a store that appended closes (store/indexqueue.py). A search
-- through the store is therefore exact after every commit.
--
-- The triggers now keep the index for the rows it holds (id <= the watermark): a delete
-- or an update of an indexed row is forgotten or re-indexed at once, while rows of the
-- tail are left to the next drain. A row inserted at or below the watermark (an id
-- reused after the top rows were deleted) is indexed at once by the insert trigger, so
-- the rule "indexed exactly when id <= watermark" holds whatever writes the table.

-- How far messages are indexed for search (one row).
create table search_watermark (
    id integer primary key check (id = 1),
    messages_indexed_to integer not null   -- messages_fts holds exactly the messages with id <= this
);

-- Every message was indexed by the per-row trigger until now.
insert into search_watermark (id, messages_indexed_to) select 1, coalesce(max(id), 0) from messages;

drop trigger messages_fts_after_insert;
drop trigger messages_fts_after_delete;
drop trigger messages_fts_after_update;

-- Only a row at or below the watermark (a reused id) is indexed at insert time.
create trigger messages_fts_after_insert after insert on messages
when new.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (rowid, text) values (new.id, new.text);
end;

-- An external-content index must be given the exact old value to forget a row; rows
-- above the watermark are not in it.
create trigger messages_fts_after_delete after delete on messages
when old.id <= (select messages_indexed_to from search_watermark)
begin
    insert into messages_fts (messages_fts, rowid, text) values ('delete', old.id, old.text);
end;

-- A changed text (or key) of an indexed row is re-indexed; the tail waits for its drain.
create trigger messages_fts_after_update after update of id, text on messages
begin
    insert into messages_fts (messages_fts, rowid, text)
        select 'delete', old.id, old.text
        where old.id <= (select messages_indexed_to from search_watermark);
    insert into messages_fts (rowid, text)
        select new.id, new.text
        where new.id <= (select messages_indexed_to from search_watermark);
end;
