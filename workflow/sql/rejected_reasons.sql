-- Rejected rows per source and reason code.
SELECT source, reason, count(*) AS rows, any_value(detail) AS example
FROM rejected GROUP BY ALL ORDER BY source, rows DESC, reason
