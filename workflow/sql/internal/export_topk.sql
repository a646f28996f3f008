-- The capture sidecar (exports/turns.topk.parquet): one row per turns.jsonl row whose turn was generated with
-- capture on, under the same id, one entry per loss-masked position (the turn's output_ids, in order): the chosen
-- token's logprob, the top-k ids and logprobs. Read from the turn's winning part row, where capture is committed.
-- Turns generated without capture (capture off, or before it was turned on) have no row.
-- requires: winners
SELECT t.conversation_id || '#' || t.turn AS id, r.token_logprobs AS logprobs, r.top_ids, r.top_logprobs
FROM turns t
JOIN turn_winners w ON w.gen_key = t.gen_key
JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
WHERE r.token_logprobs IS NOT NULL
