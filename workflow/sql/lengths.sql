-- Output length per source, and the share cut off by max_new_tokens (finish_reason = 'length').
SELECT source, completion_tokens, finish_reason = 'length' AS cut FROM dataset ORDER BY source
