-- One row per generated turn of an accepted prompt (a conversation), from the earliest committed row of its
-- current gen_key; turn 1's prompt is the prompts row's, a later turn's is in its part row; the sampling the turn
-- was sent with is its part row's (null in a part written before it was recorded), where the prompt set's values
-- came from is its prompts row's.
-- requires: winners
SELECT p.prompt_id, r.gen_key, p.source, coalesce(r.messages, p.messages) AS messages,
       coalesce(r.prompt_ids, p.prompt_ids) AS prompt_ids, r.completion, r.output_ids, r.finish_reason,
       r.prompt_tokens, r.completion_tokens, p."references"[r.turn] AS reference, p.conversation_id, r.turn,
       r.temperature, r.top_p, r.top_k, r.min_p, r.repetition_penalty, p.sampling_origin
FROM turn_winners t
JOIN parts r ON r.filename = t.filename AND r.file_row_number = t.file_row_number
JOIN prompts p ON p.gen_key = t.base_key
