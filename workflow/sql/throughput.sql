-- Whole-run throughput of every committed row. The run's generation wall time is the time some shard generated
-- (clock.sql: the union of the shards' attempts' spans), so shards count as side by side only while they were, and
-- neither a shard waiting for a free GPU nor the days before a resume add time.
-- requires: per_shard, clock
WITH wall AS (SELECT round(clock_wall('parts'), 3) AS wall_s)
SELECT sum(requests) AS requests, sum(completion_tokens) AS completion_tokens, sum(prompt_tokens) AS prompt_tokens,
       any_value(wall.wall_s) AS wall_s,
       round(sum(completion_tokens) / nullif(any_value(wall.wall_s), 0), 1) AS output_tokens_per_s,
       round(sum(requests) / nullif(any_value(wall.wall_s), 0), 3) AS requests_per_s
FROM per_shard, wall
