-- Tails of the dataset's rows, per shard and across shards, on the headline's clock. Per shard: its generation
-- wall (the sum over the attempts that made its dataset rows of each one's span of them, as
-- dataset_generation_wall_s; `attempts` counts them) and its tail (its last attempt's time after that attempt's last
-- submission). Across shards: each shard's wall less the shortest, as if they ran side by side from one start;
-- run_wall_s: the run's generation wall (the headline's, clock.sql). Rows no longer in the dataset (stale, moved
-- aside by a reset) and the time between attempts (a rerun days later) are not in it.
-- requires: winners, clock
WITH made AS (
    SELECT r.shard, r.attempt, r.submitted_at, r.finished_at
    FROM turn_winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
), attempts AS (
    SELECT shard, attempt, min(submitted_at) AS first_submit, epoch(max(finished_at) - max(submitted_at)) AS tail_s,
           epoch(max(finished_at) - min(submitted_at)) AS wall_s
    FROM made GROUP BY ALL
), shards AS (
    SELECT shard, arg_max(tail_s, first_submit) AS tail_s, sum(wall_s) AS shard_wall_s, count(*) AS attempts
    FROM attempts GROUP BY shard
)
SELECT shard, tail_s, shard_wall_s, shard_wall_s - min(shard_wall_s) OVER () AS after_first_shard_end_s,
       clock_wall('dataset_made') AS run_wall_s, attempts
FROM shards ORDER BY shard
