-- OpenAI/SpecForge style, one row per conversation: id and conversations [{role, content}] only (SpecForge passes any
-- other top-level column into the chat template); the system turn first, exactly as regeneration rendered it.
SELECT conversation_id AS id, messages AS conversations
FROM conversations
