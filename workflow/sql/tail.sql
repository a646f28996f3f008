-- Tails: per shard, the time after its last submission; across shards, last shard end minus first shard end.
WITH shards AS (
    SELECT shard, min(submitted_at) AS first_submit, max(submitted_at) AS last_submit, max(finished_at) AS finish
    FROM parts GROUP BY shard
)
SELECT shard, epoch(finish - last_submit) AS tail_s, epoch(finish - first_submit) AS shard_wall_s,
       epoch(finish - (SELECT min(finish) FROM shards)) AS after_first_shard_end_s,
       epoch((SELECT max(finish) FROM shards) - (SELECT min(first_submit) FROM shards)) AS run_wall_s
FROM shards ORDER BY shard
