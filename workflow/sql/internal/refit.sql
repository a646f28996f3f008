-- Per split shard, its conversations that model.context_length $context_length ends elsewhere than the prompt set's
-- context_length does: one whose first turn no longer fits (the prompts stage would reject it: too_long), or with a
-- finished later turn that fits one and not the other (a committed turn set aside, or an end the conversation goes
-- on from). The work a rerun after that change does, shown by `shardgen status` before it.
-- requires: winners
SELECT split_shard AS shard, count(DISTINCT gen_key) AS conversations
FROM (
    SELECT p.split_shard, p.gen_key FROM prompts p
    WHERE NOT fits_context(p.prompt_tokens, p.max_new_tokens, $context_length)
    UNION ALL
    SELECT p.split_shard, p.gen_key
    FROM parts r JOIN prompts p ON p.gen_key = r.base_key
    WHERE r.turn > 1 AND (is_generated(r.finish_reason) OR is_ended(r.finish_reason))
      AND fits_context(r.prompt_tokens, p.max_new_tokens, p.context_length)
          != fits_context(r.prompt_tokens, p.max_new_tokens, $context_length)
)
GROUP BY split_shard
