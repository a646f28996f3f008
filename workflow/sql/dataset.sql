-- One row per generated accepted prompt, from the earliest committed row of its current gen_key.
SELECT p.prompt_id, p.gen_key, p.source, p.messages, p.prompt_ids, r.completion, r.output_ids, r.finish_reason,
       p.prompt_tokens, r.completion_tokens, p.reference
FROM prompts p
JOIN winners w USING (gen_key)
JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
