-- Per shard: wall time = sum over its attempts of first submit to last completion; tokens produced per second.
WITH attempts AS (
    SELECT shard, attempt, min(submitted_at) AS first_submit, max(finished_at) AS last_finish,
           epoch(max(finished_at) - min(submitted_at)) AS wall_s,
           count(*) AS requests, sum(completion_tokens) AS completion_tokens,
           sum(prompt_tokens) AS prompt_tokens
    FROM parts GROUP BY shard, attempt
)
SELECT shard, count(*) AS attempts, sum(requests) AS requests, sum(prompt_tokens) AS prompt_tokens,
       sum(completion_tokens) AS completion_tokens, round(sum(wall_s), 3) AS wall_s,
       round(sum(completion_tokens) / nullif(sum(wall_s), 0), 1) AS output_tokens_per_s,
       min(first_submit) AS first_submit, max(last_finish) AS last_finish
FROM attempts GROUP BY shard ORDER BY shard
