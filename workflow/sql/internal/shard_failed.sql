-- This shard's accepted prompts whose every attempt aborted, with the engine's message.
-- requires: winners
SELECT o.prompt_id, o.gen_key, o.source, o.error
FROM shard_prompts sp JOIN outcomes o USING (gen_key)
WHERE o.outcome = 'failed'
ORDER BY o.prompt_id
