-- Per source: read = accepted + rejected + duplicates, accepted = generated + failed.
WITH counts AS (
    SELECT s.source, s.rows_read AS read, s.system_replaced,
           (SELECT count(*) FROM prompts p WHERE p.source = s.source) AS accepted,
           (SELECT count(*) FROM rejected r WHERE r.source = s.source) AS rejected,
           (SELECT count(*) FROM duplicates d WHERE d.source = s.source) AS duplicates,
           (SELECT coalesce(sum(dropped_turns), 0) FROM prompts p WHERE p.source = s.source) AS dropped_turns,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.outcome = 'generated') AS generated,
           (SELECT count(*) FROM outcomes o WHERE o.source = s.source AND o.outcome = 'failed') AS failed
    FROM sources s
)
SELECT *, read = accepted + rejected + duplicates AS read_balances,
       accepted = generated + failed AS accepted_balances
FROM counts
ORDER BY source
