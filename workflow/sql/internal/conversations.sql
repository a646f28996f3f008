-- One row per conversation of the text exports (text_turns: as far as generated, ended before a turn cut by
-- length): its last carried turn's messages (the exact list that turn's prompt was rendered from: system prompt if
-- any, the user turns and the regenerated answers before it, in order) followed by that turn's answer. Contents
-- are the completion texts as fed back (reasoning included); export_messages splits them. Streams: only the small
-- last-turn table is built.
-- requires: text_turns
WITH last AS (
    SELECT conversation_id, max(turn) AS turn FROM text_turns GROUP BY conversation_id
)
SELECT t.conversation_id, t.prompt_id, t.source, t.turn AS turns,
       list_concat(t.messages, [{'role': 'assistant', 'content': t.completion}]) AS messages
FROM text_turns t
JOIN last USING (conversation_id, turn)
