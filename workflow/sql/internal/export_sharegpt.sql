-- exports/sharegpt.jsonl: the text conversations in ShareGPT (sharegpt_conversations), keyed by conversation.
-- requires: sharegpt_conversations
SELECT conversation_id AS id, system, conversations FROM sharegpt_conversations
