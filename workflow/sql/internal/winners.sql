-- The earliest committed finished row of every gen_key (light columns only; heavy ones are joined once later),
-- and the outcome of every accepted prompt: generated, failed (only aborted rows) or missing.
CREATE OR REPLACE TEMP TABLE winners AS
SELECT gen_key, filename, file_row_number
FROM (
    SELECT gen_key, filename, file_row_number,
           row_number() OVER (PARTITION BY gen_key ORDER BY finished_at, filename, file_row_number) AS rank
    FROM parts
    WHERE finish_reason IN ('stop', 'length')
)
WHERE rank = 1;

CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT p.prompt_id, p.gen_key, p.source,
       CASE WHEN w.gen_key IS NOT NULL THEN 'generated'
            WHEN f.gen_key IS NOT NULL THEN 'failed'
            ELSE 'missing' END AS outcome,
       f.error
FROM prompts p
LEFT JOIN winners w USING (gen_key)
LEFT JOIN (SELECT gen_key, max(error) AS error FROM parts WHERE finish_reason = 'abort' GROUP BY gen_key) f
    USING (gen_key);
