-- 0065_compressed_content: SQLite now stores large message content zstd-compressed
-- (schema/0065_compressed_content.sql, issue 17). PostgreSQL keeps every value plain:
-- TOAST already compresses large values. It gets the same column, always NULL, so that
-- both backends share one insert statement, and the same view, so that readers of the
-- plain text (the store's context and search queries, users' SQL) share theirs.

-- Always NULL here (TOAST compresses `text` and `content_json` in place).
alter table messages add column content_zstd bytea;

-- `messages` with its content plain (here it always is).
create view messages_text as
select id, turn_id, idx, role, content_kind, content_json, text, tokens, tool_call_id,
       tool_name, is_error, provider, model, api, stop_reason, timestamp_ms, input_tokens,
       output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost, extra_json
from messages;
