-- Accepted prompts that are neither generated nor failed: merge refuses to run while any exist.
-- requires: winners
SELECT prompt_id, source FROM outcomes WHERE outcome = 'missing' ORDER BY prompt_id
