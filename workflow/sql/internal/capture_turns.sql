-- Per source, its current turns (the dataset's rows) and how many were generated with capture (their winning part
-- row holds the token logprobs: the sidecar has a row for each): a captured source's turns committed before capture
-- was turned on for it are counted, never silently left out (merge/uncaptured.py).
-- requires: winners
SELECT p.source, count(*) AS turns, count(*) FILTER (r.token_logprobs IS NOT NULL) AS captured
FROM turn_winners w
JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
JOIN prompts p ON p.gen_key = w.base_key
GROUP BY p.source
ORDER BY p.source
