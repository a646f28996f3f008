-- OpenAI/SpecForge style, one row per conversation: id and conversations [{role, content, reasoning_content}] only
-- (SpecForge passes any other top-level column into the chat template); the system turn first, exactly as
-- regeneration rendered it; each assistant answer split at the model's reasoning tags.
-- requires: split_conversations
SELECT id, conversations FROM split_conversations
