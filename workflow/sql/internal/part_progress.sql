-- Each committed part's attempt, its rows and output tokens made for the current prompt set (the split files'
-- conversations, `prompts` here) and its stale rows (made for other prompts): the commits the ETA times.
SELECT r.filename, any_value(r.attempt) AS attempt, count(*) FILTER (p.gen_key IS NOT NULL) AS rows,
       coalesce(sum(r.completion_tokens) FILTER (p.gen_key IS NOT NULL), 0) AS output_tokens,
       count(*) FILTER (p.gen_key IS NULL) AS stale_rows
FROM parts r LEFT JOIN prompts p ON p.gen_key = coalesce(r.base_key, r.gen_key)
GROUP BY r.filename
