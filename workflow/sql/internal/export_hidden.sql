-- The rows of the hidden-state exports (exports/hidden/): turns.jsonl's rows (same id, input_ids and loss_mask) with
-- the part their turn's winning row is in, where its hidden states are committed (part-*.hidden.safetensors).
-- requires: winners
SELECT t.conversation_id || '#' || t.turn AS id, t.gen_key, w.filename,
       list_concat(t.prompt_ids, t.output_ids) AS input_ids,
       list_concat(list_transform(t.prompt_ids, lambda x: CAST(0 AS INTEGER)),
                   list_transform(t.output_ids, lambda x: CAST(1 AS INTEGER))) AS loss_mask
FROM turns t
JOIN turn_winners w ON w.gen_key = t.gen_key
ORDER BY id
