-- Each committed part's attempt, its rows and output tokens made for the current prompt set (the split files'
-- conversations, `prompts` here) and its stale rows (winners' `stale_rows`): the commits the ETA times.
-- requires: winners
SELECT r.filename, any_value(r.attempt) AS attempt, count(*) FILTER (p.gen_key IS NOT NULL) AS rows,
       coalesce(sum(r.completion_tokens) FILTER (p.gen_key IS NOT NULL), 0) AS output_tokens,
       count(s.filename) AS stale_rows
FROM parts r LEFT JOIN prompts p ON p.gen_key = coalesce(r.base_key, r.gen_key)
LEFT JOIN stale_rows s ON s.filename = r.filename AND s.file_row_number = r.file_row_number
GROUP BY r.filename
