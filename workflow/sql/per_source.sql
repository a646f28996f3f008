-- Per source: accounting plus tokens and the share of generations cut off by `length`.
-- requires: accounting
SELECT a.source, a.read, a.accepted, a.rejected, a.duplicates, a.dropped_turns, a.system_replaced,
       a.generated, a.failed,
       coalesce(sum(d.prompt_tokens), 0) AS prompt_tokens, coalesce(sum(d.completion_tokens), 0) AS completion_tokens,
       round(coalesce(avg(CASE WHEN d.finish_reason = 'length' THEN 1.0 ELSE 0.0 END), 0), 4) AS length_cut_share
FROM accounting a LEFT JOIN dataset d USING (source)
GROUP BY ALL ORDER BY a.source
