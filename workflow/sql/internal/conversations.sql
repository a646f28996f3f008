-- One row per conversation of the dataset, as far as it was generated: its last generated turn's messages (the exact
-- list that turn's prompt was rendered from: system prompt if any, the user turns and the regenerated answers before
-- it, in order) followed by that turn's answer, with its token ids. Streams: only the small last-turn table is built.
WITH last AS (
    SELECT conversation_id, max(turn) AS turn FROM turns GROUP BY conversation_id
)
SELECT t.conversation_id, t.source, t.turn AS turns,
       list_concat(t.messages, [{'role': 'assistant', 'content': t.completion}]) AS messages,
       t.prompt_ids, t.output_ids
FROM turns t
JOIN last USING (conversation_id, turn)
