-- The turns `shardgen audit` re-scores: $n of the current generated turns (current_turns: the dataset query over
-- the current parts, as merge reads them) that ended by stop or length with tokens, and whose prompt and answer
-- leave a position free in $context_length (SGLang's scoring asks one token more), drawn by a hash of their gen_key
-- and $seed (the same turns for the same run and seed), each with its exact prompt, the temperature and repetition
-- penalty it was sampled with and the chosen-token logprobs captured at generation (null: generated without
-- capture).
-- requires: winners
SELECT c.conversation_id, c.turn, c.gen_key, c.prompt_ids, c.output_ids, c.temperature, c.repetition_penalty,
       r.token_logprobs
FROM current_turns c
JOIN turn_winners w ON w.gen_key = c.gen_key
JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
WHERE is_generated(c.finish_reason) AND len(c.output_ids) > 0
  AND len(c.prompt_ids) + len(c.output_ids) < $context_length
ORDER BY hash(c.gen_key, $seed), c.gen_key
LIMIT $n
