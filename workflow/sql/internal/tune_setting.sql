-- One `shardgen tune` setting (or one benchmark arm) between $since and $until (the warm-up is before): whole-run
-- output tokens/s from the parts submitted in it; from the scheduler's telemetry in it: steady decode tok/s =
-- median of the decode lines while requests wait in the queue (the window is full and the tail has not begun),
-- concurrency reached, pool usage, eager decode batches.
WITH run AS (
    SELECT count(*) AS requests, count(*) FILTER (finish_reason = 'abort') AS aborted,
           sum(completion_tokens) AS completion_tokens, epoch(max(finished_at) - min(submitted_at)) AS wall_s
    FROM parts WHERE submitted_at BETWEEN $since AND $until
), decode AS (
    SELECT * FROM telemetry WHERE kind = 'decode' AND ts BETWEEN $since AND $until
)
SELECT run.requests, run.aborted, run.completion_tokens, round(run.wall_s, 3) AS wall_s,
       round(run.completion_tokens / nullif(run.wall_s, 0), 1) AS output_tps,
       (SELECT round(median(gen_throughput), 1) FROM decode WHERE queue > 0) AS steady_decode_tps,
       (SELECT count(*) FROM decode WHERE queue > 0) AS steady_lines,
       (SELECT max(running) FROM decode) AS running_max,
       (SELECT max(mamba_usage) FROM decode) AS mamba_usage_max,
       (SELECT max(full_token_usage) FROM decode) AS kv_usage_max,
       (SELECT count(*) FILTER (NOT cuda_graph) FROM decode) AS eager_decode_lines
FROM run
