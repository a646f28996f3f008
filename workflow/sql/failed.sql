-- Accepted prompts whose current gen_key has only aborted rows, with the engine's message.
-- requires: winners
SELECT prompt_id, gen_key, source, error FROM outcomes WHERE outcome = 'failed' ORDER BY source, prompt_id
