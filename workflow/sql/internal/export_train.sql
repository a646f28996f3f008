-- dataset/train.jsonl: ShareGPT, one row per generated turn the text exports carry (text_turns): the prompt turns
-- plus the new assistant turn, whole (reasoning included: ShareGPT has no field for it).
-- requires: text_turns
SELECT prompt_id, source,
       list_append(
           list_transform(messages, lambda m: {'from': CASE m.role WHEN 'user' THEN 'human'
                                                               WHEN 'assistant' THEN 'gpt'
                                                               ELSE m.role END,
                                          'value': m.content}),
           {'from': 'gpt', 'value': completion}) AS conversations
FROM text_turns
