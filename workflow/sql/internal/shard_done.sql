-- The done file of one shard ($shard): its prompts' outcomes (committed by any shard) and its own attempts' work.
-- requires: winners, per_shard
WITH mine AS (
    SELECT o.outcome FROM shard_prompts sp JOIN outcomes o USING (gen_key)
), work AS (
    SELECT * FROM per_shard WHERE shard = $shard
)
SELECT $shard AS shard,
       (SELECT count(*) FROM shard_prompts) AS prompts,
       (SELECT count(*) FROM mine WHERE outcome = 'generated') AS generated,
       (SELECT count(*) FROM mine WHERE outcome = 'failed') AS failed,
       coalesce((SELECT prompt_tokens FROM work), 0) AS prompt_tokens,
       coalesce((SELECT completion_tokens FROM work), 0) AS completion_tokens,
       coalesce((SELECT wall_s FROM work), 0) AS wall_s,
       (SELECT output_tokens_per_s FROM work) AS output_tokens_per_s
