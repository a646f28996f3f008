-- ShareGPT, one row per text conversation, as FastChat's train_with_template.py reads it: human/gpt turns only (a
-- system turn would be an unknown role there: KeyError 'system'), strictly alternating, gpt last, each answer whole
-- (ShareGPT has no reasoning field); the system prompt in the top-level system field (null when none). A
-- conversation ends before its first empty answer (the model emitted only its end-of-turn token), and is left out
-- when that is its first: FastChat trains an answer's text without its end of turn, so an empty one trains nothing,
-- and its masking then slips onto the next user turn (measured with FastChat 0.2.36's own code).
-- requires: text_turns
WITH first_empty AS (
    SELECT conversation_id, min(turn) AS turn FROM text_turns WHERE completion = '' GROUP BY conversation_id
), carried AS (
    SELECT t.* FROM text_turns t LEFT JOIN first_empty e USING (conversation_id)
    WHERE e.turn IS NULL OR t.turn < e.turn
), last AS (
    SELECT conversation_id, max(turn) AS turn FROM carried GROUP BY conversation_id
)
SELECT t.conversation_id, t.prompt_id, t.source,
       CASE WHEN t.messages[1].role = 'system' THEN t.messages[1].content END AS system,
       list_transform(list_filter(list_concat(t.messages, [{'role': 'assistant', 'content': t.completion}]),
                                  lambda m: m.role <> 'system'),
                      lambda m: {'from': CASE m.role WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'gpt' ELSE m.role END,
                            'value': m.content}) AS conversations
FROM carried t
JOIN last USING (conversation_id, turn)
