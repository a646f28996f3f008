-- Output tokens/s of the dataset's rows per shard over generation time ($bucket_s-second buckets of completion
-- times), on the headline's clock (clock.sql): the run's real timeline, less the time when no shard generated, so
-- shards are side by side where they ran side by side and one after the other where they did not, and the total
-- curve's mean over the run's generation wall is the headline (dataset tokens / generation wall).
-- requires: winners, clock
SELECT m.shard, floor((c.offset_s + epoch(m.finished_at - c.island_start)) / $bucket_s) * $bucket_s AS t,
       sum(m.completion_tokens) / $bucket_s AS output_tokens_per_s
FROM dataset_made m JOIN clock('dataset_made') c USING (shard, attempt)
GROUP BY ALL ORDER BY shard, t
