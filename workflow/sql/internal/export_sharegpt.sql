-- ShareGPT, one row per conversation (FastChat's train_with_template.py): the regenerated answers in place of the
-- originals as human/gpt turns, the system prompt in the top-level system field (null when none), never a turn.
-- requires: conversations
SELECT conversation_id AS id,
       CASE WHEN messages[1].role = 'system' THEN messages[1].content END AS system,
       list_transform(list_filter(messages, lambda m: m.role <> 'system'),
                      lambda m: {'from': CASE m.role WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'gpt' ELSE m.role END,
                            'value': m.content}) AS conversations
FROM conversations
