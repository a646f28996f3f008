-- Accepted prompts (conversations) whose current gen_key has only aborted rows at some turn, with the engine's
-- message: turn, the turn that failed; generated_turns, its turns before it (in the dataset).
-- requires: winners
SELECT prompt_id, gen_key, source, error, failed_turn AS turn, generated_turns FROM outcomes
WHERE outcome = 'failed' ORDER BY source, prompt_id
