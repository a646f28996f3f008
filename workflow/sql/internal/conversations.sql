-- One row per conversation of the dataset, as far as it was generated: the messages its first turn was rendered
-- from (system prompt, if any, and user turn 1), then each turn's regenerated answer followed by the next user turn
-- (the last message of that turn's prompt), in turn order; turns counts the generated turns.
SELECT conversation_id,
       any_value(source) AS source,
       CAST(count(*) AS INTEGER) AS turns,
       flatten(list(list_concat(CASE WHEN turn = 1 THEN messages ELSE [messages[-1]] END,
                                [{'role': 'assistant', 'content': completion}]) ORDER BY turn)) AS messages
FROM turns
GROUP BY conversation_id
