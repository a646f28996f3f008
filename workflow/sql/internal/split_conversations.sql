-- The text conversations with each assistant answer split at the model's reasoning tags (shardgen/merge/reasoning.py):
-- content, and reasoning_content (null where there was none, or where it never closed).
-- requires: conversations
SELECT conversation_id AS id,
       list_transform(messages, lambda m: {
           'role': m.role,
           'content': CASE WHEN m.role = 'assistant' THEN content_of(m.content) ELSE m.content END,
           'reasoning_content': CASE WHEN m.role = 'assistant' THEN reasoning_of(m.content) END}) AS conversations
FROM conversations
