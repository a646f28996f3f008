-- Tokens by turn index: per turn of a conversation (1 = first), the rows generated, prompt and output token totals and means, and the share cut off by max_new_tokens.
SELECT turn, count(*) AS rows, sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS output_tokens,
       round(avg(prompt_tokens), 1) AS mean_prompt_tokens, round(avg(completion_tokens), 1) AS mean_output_tokens,
       round(avg(CAST(finish_reason = 'length' AS INTEGER)), 4) AS cut_share
FROM turns GROUP BY turn ORDER BY turn
