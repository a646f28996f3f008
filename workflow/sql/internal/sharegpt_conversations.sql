-- ShareGPT, one row per text conversation, as FastChat's train_with_template.py reads it: human/gpt turns only (a
-- system turn would be an unknown role there: KeyError 'system'), strictly alternating, gpt last, each answer whole
-- (ShareGPT has no reasoning field); the system prompt in the top-level system field (null when none).
-- requires: conversations
SELECT conversation_id, prompt_id, source,
       CASE WHEN messages[1].role = 'system' THEN messages[1].content END AS system,
       list_transform(list_filter(messages, lambda m: m.role <> 'system'),
                      lambda m: {'from': CASE m.role WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'gpt' ELSE m.role END,
                            'value': m.content}) AS conversations
FROM conversations
