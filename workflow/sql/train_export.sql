-- ShareGPT conversations for training: the prompt turns plus the new assistant turn.
SELECT prompt_id, source,
       list_append(
           list_transform(messages, lambda m: {'from': CASE m.role WHEN 'user' THEN 'human'
                                                               WHEN 'assistant' THEN 'gpt'
                                                               ELSE m.role END,
                                          'value': m.content}),
           {'from': 'gpt', 'value': completion}) AS conversations
FROM dataset
