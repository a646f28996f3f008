-- The dataset's turns the text exports carry (exports.on_length and the template's end-of-turn id, in the one-row
-- table export_rule): a conversation's turns before its first turn that did not end with the template's end of
-- turn (cut by max_new_tokens, finish_reason length; or a stop on another stop token, Qwen3's <|endoftext|>), so
-- no loader trains an end of turn the model never produced; under drop_conversation, none of such a conversation.
WITH rule AS (SELECT * FROM export_rule),
first_cut AS (
    SELECT conversation_id, min(turn) AS turn
    FROM turns
    WHERE finish_reason <> 'stop'
       OR output_ids[-1] IS DISTINCT FROM coalesce((SELECT end_of_turn_id FROM rule), output_ids[-1])
    GROUP BY conversation_id
)
SELECT t.*
FROM turns t
LEFT JOIN first_cut c USING (conversation_id)
WHERE c.turn IS NULL OR (t.turn < c.turn AND (SELECT on_length FROM rule) = 'end_conversation')
