-- SpecForge's multi-turn reasoning route (scripts/expand_reasoning_conversations.py), one row per conversation whose
-- every assistant turn has non-empty reasoning and a non-empty answer (what that script requires; the others are
-- counted in the manifest): id, status 'success' (the script's own field) and the split conversation.
-- requires: split_conversations
SELECT id, 'success' AS status, conversations
FROM split_conversations
WHERE len(list_filter(conversations, lambda m: m.role = 'assistant'
                      AND NOT (regexp_matches(coalesce(m.reasoning_content, ''), '\S')
                               AND regexp_matches(m.content, '\S')))) = 0
