-- The dataset's turns the text exports carry (exports.on_length, in the one-row table export_rule): a conversation's
-- turns before its first turn that did not end with a stop (finish_reason length: cut by max_new_tokens), so no
-- loader appends an end of turn the model never produced; under drop_conversation, none of such a conversation.
WITH first_cut AS (
    SELECT conversation_id, min(turn) AS turn FROM turns WHERE finish_reason <> 'stop' GROUP BY conversation_id
)
SELECT t.*
FROM turns t
LEFT JOIN first_cut c USING (conversation_id)
WHERE c.turn IS NULL OR (t.turn < c.turn AND (SELECT on_length FROM export_rule) = 'end_conversation')
