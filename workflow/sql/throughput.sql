-- Whole-run throughput. Shards run side by side, so the run's generation wall time is its longest shard's
-- (each shard's summed over its attempts: a resume days later adds no idle time).
-- requires: per_shard
SELECT sum(requests) AS requests, sum(completion_tokens) AS completion_tokens, sum(prompt_tokens) AS prompt_tokens,
       max(wall_s) AS wall_s,
       round(sum(completion_tokens) / nullif(max(wall_s), 0), 1) AS output_tokens_per_s,
       round(sum(requests) / nullif(max(wall_s), 0), 3) AS requests_per_s
FROM per_shard
