-- The report's headline numbers (report/summary.json); every figure names its scope:
--   prompts_*, generated, failed: the current prompt set (accounting); failed_partly: the failed conversations with
--     generated turns before the failed one (those turns are dataset rows);
--   dataset_*: the rows of dataset/data.parquet. Its wall time is the run's generation clock over them (clock.sql):
--     the union of each shard's attempts' spans of those rows (first submit to last completion), so shards count as
--     side by side only while they were, and neither a shard waiting for a free GPU nor the days before a rerun
--     count. dataset_output_tokens_per_s (the headline) = tokens / that wall; dataset_shards_at_once: the most
--     shards generating those rows at one moment;
--   parts_*: every committed row in the parts (stale, duplicate and aborted rows too): what the engines did.
-- requires: winners, accounting, throughput, clock
WITH dataset_wall AS (
    SELECT clock_wall('dataset_made') AS wall_s, at_once('dataset_made') AS shards_at_once
), dataset_totals AS (
    SELECT count(*) AS rows, coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
           coalesce(sum(completion_tokens), 0) AS completion_tokens
    FROM dataset
)
SELECT (SELECT sum(read) FROM accounting) AS prompts_read,
       (SELECT sum(accepted) FROM accounting) AS prompts_accepted,
       (SELECT sum(rejected) FROM accounting) AS prompts_rejected,
       (SELECT sum(duplicates) FROM accounting) AS prompts_duplicate,
       (SELECT sum(generated) FROM accounting) AS generated,
       (SELECT sum(failed) FROM accounting) AS failed,
       (SELECT count(*) FROM outcomes WHERE outcome = 'failed' AND generated_turns > 0) AS failed_partly,
       d.rows AS dataset_rows, d.prompt_tokens AS dataset_prompt_tokens,
       d.completion_tokens AS dataset_completion_tokens,
       round(dw.wall_s, 3) AS dataset_generation_wall_s,
       round(d.completion_tokens / nullif(dw.wall_s, 0), 1) AS dataset_output_tokens_per_s,
       dw.shards_at_once AS dataset_shards_at_once,
       t.requests AS parts_rows, t.completion_tokens AS parts_completion_tokens,
       t.wall_s AS parts_generation_wall_s, t.output_tokens_per_s AS parts_output_tokens_per_s,
       t.requests_per_s AS parts_requests_per_s,
       -- finished rows not used: a gen_key committed more than once (the earliest wins), or a stale gen_key
       (SELECT count(*) - count(DISTINCT gen_key) FROM parts WHERE is_generated(finish_reason))
           AS duplicate_commits,
       (SELECT count(*) FROM stale_rows) AS stale_rows
FROM throughput t, dataset_totals d, dataset_wall dw
