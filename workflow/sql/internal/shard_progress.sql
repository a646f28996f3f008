-- Each shard's progress against the current prompt set (the split files' conversations, `prompts` here; rows made
-- for other prompts are stale and left out), for `shardgen status` and its ETA: committed = its turns with a
-- committed row (generated, ended or aborted), conversations = those begun, budget_spent = their max_new_tokens;
-- turns, max_turn and output_tokens from its generated turns (turn_winners); missing = its conversations with no
-- outcome yet (winners' `outcomes`: neither generated nor failed), what a done file of this prompt set rules out.
-- One row per shard of the split, with nothing committed too.
-- requires: winners
WITH committed AS (
    SELECT p.split_shard AS shard, coalesce(r.turn, 1) AS turn, any_value(p.max_new_tokens) AS max_new_tokens
    FROM parts r JOIN prompts p ON p.gen_key = coalesce(r.base_key, r.gen_key)
    GROUP BY p.split_shard, p.gen_key, coalesce(r.turn, 1)
), generated AS (
    SELECT p.split_shard AS shard, t.turn, r.completion_tokens
    FROM turn_winners t JOIN parts r USING (filename, file_row_number) JOIN prompts p ON p.gen_key = t.base_key
), missing AS (
    SELECT p.split_shard AS shard, count(*) FILTER (o.outcome = 'missing') AS missing
    FROM prompts p JOIN outcomes o USING (gen_key)
    GROUP BY p.split_shard
)
SELECT m.shard, m.missing, coalesce(c.committed, 0) AS committed, coalesce(c.conversations, 0) AS conversations,
       coalesce(c.budget_spent, 0) AS budget_spent, coalesce(g.turns, 0) AS turns,
       coalesce(g.max_turn, 0) AS max_turn, coalesce(g.output_tokens, 0) AS output_tokens
FROM missing m
LEFT JOIN (SELECT shard, count(*) AS committed, count(*) FILTER (turn = 1) AS conversations,
             coalesce(sum(max_new_tokens), 0) AS budget_spent
      FROM committed GROUP BY shard) c USING (shard)
LEFT JOIN (SELECT shard, count(*) AS turns, max(turn) AS max_turn, sum(completion_tokens) AS output_tokens
           FROM generated GROUP BY shard) g USING (shard)
