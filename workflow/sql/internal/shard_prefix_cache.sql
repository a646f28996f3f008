-- The prefix cache's share of one shard's ($shard) prompt tokens, per turn index: the turns its attempts generated
-- (stop or length, in this shard's current conversations), their prompt tokens and the tokens the engine took from
-- its prefix cache (the engine's count per request: SGLang's meta_info cached_tokens). For a later turn also the
-- tokens its prompt shares with its conversation's previous turn: the longest common prefix of its prompt_ids and
-- that turn's prompt_ids + output_ids (its winning row, the one the conversation goes on from), the most a cache
-- that kept the history could serve. cached_of_shared can pass 1 where the cache also serves a prefix common to
-- other conversations (a system prompt) beyond the history.
-- requires: winners
WITH mine AS (
    -- this shard's rows (its conversations' turns are its own: a conversation goes to one shard), read alone so the
    -- token lists of the other shards' parts stay on disk
    SELECT r.filename, r.file_row_number, r.conversation_id, r.turn, r.finish_reason, r.prompt_tokens,
           r.cached_tokens, r.output_ids, coalesce(r.prompt_ids, sp.prompt_ids) AS sent_ids  -- turn 1's: the split's
    FROM parts r JOIN shard_prompts sp ON sp.gen_key = r.base_key
    WHERE r.shard = $shard
), generated AS (
    SELECT conversation_id, turn, sent_ids, prompt_tokens, cached_tokens FROM mine WHERE is_generated(finish_reason)
), history AS (
    SELECT m.conversation_id, m.turn, list_concat(m.sent_ids, m.output_ids) AS tokens
    FROM winners w JOIN mine m USING (filename, file_row_number)
), shared AS (
    SELECT g.turn, g.prompt_tokens, g.cached_tokens,
           -- the first position where the two differ (list_zip pads the shorter with NULL, never false), else
           -- the shorter's length
           CASE WHEN g.turn > 1 THEN coalesce(
               list_position(list_transform(list_zip(g.sent_ids, h.tokens), lambda x: x[1] = x[2]), false),
               least(len(g.sent_ids), len(h.tokens)) + 1) - 1 END AS shared_tokens
    FROM generated g LEFT JOIN history h ON h.conversation_id = g.conversation_id AND h.turn = g.turn - 1
)
SELECT turn, count(*) AS requests, sum(prompt_tokens) AS prompt_tokens, sum(cached_tokens) AS cached_tokens,
       round(sum(cached_tokens) / nullif(sum(prompt_tokens), 0), 4) AS cached_share,
       sum(shared_tokens) AS shared_tokens,
       round(sum(cached_tokens) / nullif(sum(shared_tokens), 0), 4) AS cached_of_shared
FROM shared
GROUP BY turn
ORDER BY turn
