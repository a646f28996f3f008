-- Per shard: wall time = sum over its attempts of first submit to last completion; tokens produced per second.
-- prompts: its prompts in the current split (`split`); a shard folder of an earlier split with more shards has none
-- (null), and a shard of the split whose folder made nothing is listed with zeros.
-- requests .. output_tokens_per_s: every committed row of its parts (stale and duplicate rows too: what its engine
-- did, as its done file); dataset_*: the dataset's rows it made, on the headline's clock (each attempt's span of
-- them, summed): their rows and tokens add up to the summary's; the run's wall is no shard's (clock.sql).
-- requires: winners
WITH attempts AS (
    SELECT shard, attempt, min(submitted_at) AS first_submit, max(finished_at) AS last_finish,
           epoch(max(finished_at) - min(submitted_at)) AS wall_s,
           count(*) AS requests, sum(completion_tokens) AS completion_tokens,
           sum(prompt_tokens) AS prompt_tokens
    FROM parts GROUP BY shard, attempt
), made AS (
    SELECT r.shard, r.attempt, count(*) AS rows, sum(r.completion_tokens) AS completion_tokens,
           epoch(max(r.finished_at) - min(r.submitted_at)) AS wall_s
    FROM turn_winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
    GROUP BY ALL
), made_by_shard AS (
    SELECT shard, sum(rows) AS rows, sum(completion_tokens) AS completion_tokens, sum(wall_s) AS wall_s
    FROM made GROUP BY shard
), work AS (
    SELECT a.shard, count(*) AS attempts, sum(requests) AS requests, sum(prompt_tokens) AS prompt_tokens,
           sum(a.completion_tokens) AS completion_tokens, round(sum(a.wall_s), 3) AS wall_s,
           round(sum(a.completion_tokens) / nullif(sum(a.wall_s), 0), 1) AS output_tokens_per_s,
           min(first_submit) AS first_submit, max(last_finish) AS last_finish,
           coalesce(any_value(d.rows), 0) AS dataset_rows,
           coalesce(any_value(d.completion_tokens), 0) AS dataset_completion_tokens,
           round(coalesce(any_value(d.wall_s), 0), 3) AS dataset_wall_s,
           round(any_value(d.completion_tokens) / nullif(any_value(d.wall_s), 0), 1) AS dataset_output_tokens_per_s
    FROM attempts a LEFT JOIN made_by_shard d USING (shard)
    GROUP BY a.shard
)
SELECT shard, s.prompts, coalesce(w.attempts, 0) AS attempts, coalesce(w.requests, 0) AS requests,
       coalesce(w.prompt_tokens, 0) AS prompt_tokens, coalesce(w.completion_tokens, 0) AS completion_tokens,
       coalesce(w.wall_s, 0) AS wall_s, w.output_tokens_per_s, w.first_submit, w.last_finish,
       coalesce(w.dataset_rows, 0) AS dataset_rows, coalesce(w.dataset_completion_tokens, 0) AS dataset_completion_tokens,
       coalesce(w.dataset_wall_s, 0) AS dataset_wall_s, w.dataset_output_tokens_per_s
FROM work w FULL JOIN split s USING (shard)
ORDER BY shard
