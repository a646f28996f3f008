-- Per source: read = accepted + rejected + duplicates, accepted = generated + failed (generated = complete +
-- ended by context_exhausted), and per turn: the accepted conversations' turns = generated turns + the turns
-- not generated because the conversation ended early (by reason) or is still missing.
-- requires: winners
WITH counts AS (
    SELECT s.source, s.rows_read AS read, s.system_replaced,
           (SELECT count(*) FROM prompts p WHERE p.source = s.source) AS accepted,
           (SELECT count(*) FROM rejected r WHERE r.source = s.source) AS rejected,
           (SELECT count(*) FROM duplicates d WHERE d.source = s.source) AS duplicates,
           (SELECT coalesce(sum(dropped_turns), 0) FROM prompts p WHERE p.source = s.source) AS dropped_turns,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.outcome = 'generated') AS generated,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.outcome = 'failed') AS failed,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.end_reason = 'complete') AS complete,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.end_reason = 'context_exhausted')
               AS context_exhausted,
           (SELECT coalesce(sum(turns), 0) FROM outcomes o WHERE o.source = s.source) AS turns,
           (SELECT coalesce(sum(generated_turns), 0) FROM outcomes o WHERE o.source = s.source) AS generated_turns,
           (SELECT coalesce(sum(turns - generated_turns), 0) FROM outcomes o
               WHERE o.source = s.source AND o.end_reason = 'context_exhausted') AS context_exhausted_turns,
           (SELECT coalesce(sum(turns - generated_turns), 0) FROM outcomes o
               WHERE o.source = s.source AND o.end_reason = 'failed') AS failed_turns,
           (SELECT coalesce(sum(turns - generated_turns), 0) FROM outcomes o
               WHERE o.source = s.source AND o.end_reason IS NULL) AS missing_turns
    FROM sources s
)
SELECT *, read = accepted + rejected + duplicates AS read_balances,
       accepted = generated + failed AND generated = complete + context_exhausted AS accepted_balances,
       turns = generated_turns + context_exhausted_turns + failed_turns + missing_turns AS turns_balance
FROM counts
ORDER BY source
