-- Every committed gen_key's outcome, for generate's to-do list: generated (it has a winner), ended (its final row
-- is a recorded end of the conversation before that turn) or aborted (failures only, counted in aborts).
-- requires: winners
SELECT p.gen_key,
       CASE WHEN f.generated THEN 'generated' WHEN f.gen_key IS NOT NULL THEN 'ended' ELSE 'aborted' END AS outcome,
       count(*) FILTER (NOT is_generated(p.finish_reason) AND NOT is_ended(p.finish_reason)) AS aborts
FROM parts p LEFT JOIN final_rows f USING (gen_key)
GROUP BY ALL
