-- The row each committed turn of the conversations $conversations counts by (final_rows: its winner, else its
-- recorded end), with the answer the next turn is built on: where a conversation resumes.
-- requires: winners
SELECT r.gen_key, f.generated, r.completion, r.output_ids
FROM final_rows f JOIN parts r USING (filename, file_row_number)
WHERE r.conversation_id IN (SELECT unnest($conversations))
