-- Output tokens/s of the dataset's rows per shard over time ($bucket_s-second buckets of completion times, counted
-- from the first submission), so that the plot and the headline (dataset tokens / generation wall) agree.
WITH made AS (
    SELECT r.shard, r.submitted_at, r.finished_at, r.completion_tokens
    FROM turn_winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
)
SELECT shard, time_bucket(to_seconds($bucket_s), finished_at, (SELECT min(submitted_at) FROM made)) AS t,
       sum(completion_tokens) / $bucket_s AS output_tokens_per_s
FROM made GROUP BY ALL ORDER BY shard, t
