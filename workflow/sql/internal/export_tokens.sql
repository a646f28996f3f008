-- Token level, one row per conversation: input_ids = its last generated turn's prompt_ids followed by that turn's
-- output_ids (a turn cut by length included, as generated); loss_mask = 0 on the prompt (earlier regenerated answers
-- included: they are context there, re-rendered by the template), 1 on the output_ids, the tokens the model
-- generated in this rendering (end-of-turn included when it stopped). export_turns has every turn.
WITH last AS (
    SELECT conversation_id, max(turn) AS turn FROM turns GROUP BY conversation_id
)
SELECT conversation_id AS id,
       list_concat(prompt_ids, output_ids) AS input_ids,
       list_concat(list_transform(prompt_ids, lambda x: CAST(0 AS INTEGER)),
                   list_transform(output_ids, lambda x: CAST(1 AS INTEGER))) AS loss_mask
FROM turns
JOIN last USING (conversation_id, turn)
