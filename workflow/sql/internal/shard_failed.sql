-- This shard's accepted prompts (conversations) with a turn whose every attempt aborted, with the engine's message:
-- turn, the turn that failed; generated_turns, its turns before it (in the dataset).
-- requires: winners
SELECT o.prompt_id, o.gen_key, o.source, o.error, o.failed_turn AS turn, o.generated_turns
FROM shard_prompts sp JOIN outcomes o USING (gen_key)
WHERE o.outcome = 'failed'
ORDER BY o.prompt_id
