-- Token totals of the dataset per source and finish_reason, and the share cut off by max_new_tokens.
SELECT source, finish_reason, count(*) AS rows, sum(prompt_tokens) AS prompt_tokens,
       sum(completion_tokens) AS completion_tokens,
       round(count(*) / sum(count(*)) OVER (PARTITION BY source), 4) AS share_of_source
FROM dataset GROUP BY source, finish_reason ORDER BY source, finish_reason
