-- Output tokens/s per shard over time, from the parts (10-second buckets of completion times).
SELECT shard, time_bucket(INTERVAL 10 SECOND, finished_at) AS t,
       sum(completion_tokens) / 10.0 AS output_tokens_per_s
FROM parts GROUP BY ALL ORDER BY shard, t
