-- One row per generated turn of an accepted prompt (a conversation), from the earliest committed row of its
-- current gen_key; turn 1's prompt is the prompts row's, a later turn's is in its part row; the sampling the turn
-- was sent with is its part row's (null in a part written before it was recorded), where the prompt set's values
-- came from is its prompts row's; how sure the target was (logprob_mean, logprob_min, topk_entropy_mean) is its part
-- row's (null: generated with neither capture nor capture.signal). sampling_fields: the names of the sampling columns (shardgen.sampling.FIELDS), a
-- variable db.connect sets.
-- requires: winners
SELECT p.prompt_id, r.gen_key, p.source, coalesce(r.messages, p.messages) AS messages,
       coalesce(r.prompt_ids, p.prompt_ids) AS prompt_ids, r.completion, r.output_ids, r.finish_reason,
       r.prompt_tokens, r.completion_tokens, p."references"[r.turn] AS reference, p.conversation_id, r.turn,
       COLUMNS(getvariable('sampling_fields')), p.sampling_origin,
       r.logprob_mean, r.logprob_min, r.topk_entropy_mean
FROM turn_winners t
JOIN parts r ON r.filename = t.filename AND r.file_row_number = t.file_row_number
-- the prompts row less its sampling columns, so the sampling columns above are the part row's alone
JOIN (SELECT COLUMNS(lambda c: NOT list_contains(getvariable('sampling_fields'), c)) FROM prompts) p
  ON p.gen_key = t.base_key
