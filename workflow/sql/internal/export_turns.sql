-- Token level, one row per generated turn: input_ids = the turn's exact prompt_ids followed by its output_ids,
-- loss_mask 1 exactly on the output_ids, so every generated token is trained in exactly one row with the ids the
-- model generated. A turn cut by length is kept as generated (no end of turn; finish_reason says length). The other
-- columns are passed over by both trainers' token loaders (SpecForge reads input_ids and loss_mask only,
-- speculators drops every other column).
SELECT conversation_id || '#' || turn AS id,
       list_concat(prompt_ids, output_ids) AS input_ids,
       list_concat(list_transform(prompt_ids, lambda x: CAST(0 AS INTEGER)),
                   list_transform(output_ids, lambda x: CAST(1 AS INTEGER))) AS loss_mask,
       conversation_id, turn, finish_reason, source
FROM turns
