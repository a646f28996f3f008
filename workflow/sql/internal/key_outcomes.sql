-- Every committed gen_key's outcome, for generate's to-do list: generated (it has a winner), ended (its final row
-- is a recorded end of the conversation before that turn), shrunk (only generated rows, which no longer fit their
-- conversation's context: it ends before this turn now), grew (only ends, at a turn that fits the context now: the
-- conversation goes on from here) or aborted (failures only, counted in aborts).
-- requires: winners
SELECT p.gen_key,
       CASE WHEN f.generated THEN 'generated' WHEN f.gen_key IS NOT NULL THEN 'ended'
            WHEN bool_or(x.filename IS NOT NULL AND is_generated(p.finish_reason)) THEN 'shrunk'
            WHEN bool_or(x.filename IS NOT NULL) THEN 'grew' ELSE 'aborted' END AS outcome,
       count(*) FILTER (NOT is_generated(p.finish_reason) AND NOT is_ended(p.finish_reason)) AS aborts
FROM parts p LEFT JOIN final_rows f USING (gen_key)
LEFT JOIN refit_rows x ON x.filename = p.filename AND x.file_row_number = p.file_row_number
GROUP BY p.gen_key, f.generated, f.gen_key
