-- The report's headline numbers (report/summary.json). Shard wall times add over attempts; the run's
-- generation wall time is the longest shard's, since shards run side by side.
SELECT (SELECT sum(read) FROM accounting) AS prompts_read,
       (SELECT sum(accepted) FROM accounting) AS prompts_accepted,
       (SELECT sum(rejected) FROM accounting) AS prompts_rejected,
       (SELECT sum(duplicates) FROM accounting) AS prompts_duplicate,
       (SELECT sum(generated) FROM accounting) AS generated,
       (SELECT sum(failed) FROM accounting) AS failed,
       (SELECT coalesce(sum(prompt_tokens), 0) FROM dataset) AS prompt_tokens_total,
       (SELECT coalesce(sum(completion_tokens), 0) FROM dataset) AS completion_tokens_total,
       t.wall_s AS generation_wall_s, t.output_tokens_per_s, t.requests_per_s,
       -- finished rows not used: a gen_key committed more than once (the earliest wins), or a stale gen_key
       (SELECT count(*) - count(DISTINCT gen_key) FROM parts WHERE finish_reason IN ('stop', 'length'))
           AS duplicate_commits,
       (SELECT count(*) FROM parts WHERE finish_reason IN ('stop', 'length')
           AND gen_key NOT IN (SELECT gen_key FROM prompts)) AS stale_rows
FROM throughput t
