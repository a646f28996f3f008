-- Output tokens/s of the dataset's rows per shard over generation time ($bucket_s-second buckets of completion
-- times), on the headline's clock: each shard from its first submission, its attempts end to end (each one's span
-- of the dataset's rows, as dataset_generation_wall_s sums them), so shards count as side by side and the total
-- curve's mean over the longest shard's wall is the headline (dataset tokens / generation wall).
-- requires: winners
WITH made AS (
    SELECT r.shard, r.attempt, r.submitted_at, r.finished_at, r.completion_tokens
    FROM turn_winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
), spans AS (
    SELECT shard, attempt, min(submitted_at) AS first_submit, epoch(max(finished_at) - min(submitted_at)) AS wall_s
    FROM made GROUP BY ALL
), starts AS (
    SELECT shard, attempt, first_submit,
           coalesce(sum(wall_s) OVER (PARTITION BY shard ORDER BY first_submit
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS start_s
    FROM spans
)
SELECT m.shard, floor((s.start_s + epoch(m.finished_at - s.first_submit)) / $bucket_s) * $bucket_s AS t,
       sum(m.completion_tokens) / $bucket_s AS output_tokens_per_s
FROM made m JOIN starts s USING (shard, attempt)
GROUP BY ALL ORDER BY shard, t
