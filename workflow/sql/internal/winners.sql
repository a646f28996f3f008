-- "Finished" and the winner rule, defined once: every query of a committed row's outcome, in SQL and in Python
-- (generate/checkpoint.py runs these), reads them here. A row is generated when its generation ended by itself
-- (stop, length); ended (context_exhausted) records that its conversation stopped before that turn (nothing was
-- generated: the turn did not fit the context); anything else (abort) is a failure. A turn after the first counts
-- only while its outcome agrees with its conversation's model.context_length (the prompt set's `context_length`):
-- a generated turn that fits it, an end at a turn that does not. So after the context shrinks a conversation ends
-- where a fresh run ends it (its later committed turns are set aside), and after it grows it goes on from its last
-- committed turn. final_rows: the one row each gen_key counts by: its earliest generated row, else its earliest
-- recorded end, among those that count; winners: those that are generated
-- (light columns only; heavy ones are joined once later). Then the current turns (turn_winners: winners whose
-- base_key is a current prompts row; one per generated turn), and the outcome of every accepted prompt (a
-- conversation): generated (complete, or ended by context_exhausted), failed (a turn has only aborted rows: it
-- ended there with the engine's message, failed_turn; its turns before it are generated turns, in the dataset as a
-- context_exhausted conversation's are) or missing; and the stale rows.
CREATE OR REPLACE TEMP MACRO is_generated(finish_reason) AS finish_reason IN ('stop', 'length');
CREATE OR REPLACE TEMP MACRO is_ended(finish_reason) AS finish_reason = 'context_exhausted';
-- A turn fits when its prompt and max_new_tokens do; a prompt set built before the column was kept has no limit.
CREATE OR REPLACE TEMP MACRO fits_context(prompt_tokens, max_new_tokens, context_length) AS
    context_length IS NULL OR prompt_tokens + max_new_tokens <= context_length;

-- Each finished turn after the first, with whether its outcome disagrees with its conversation's context now.
CREATE OR REPLACE TEMP TABLE refit_rows AS
SELECT r.filename, r.file_row_number
FROM parts r JOIN prompts p ON p.gen_key = r.base_key
WHERE r.turn > 1 AND (is_generated(r.finish_reason) OR is_ended(r.finish_reason))
  AND fits_context(r.prompt_tokens, p.max_new_tokens, p.context_length) != is_generated(r.finish_reason);

CREATE OR REPLACE TEMP TABLE final_rows AS
SELECT gen_key, filename, file_row_number, generated
FROM (
    SELECT gen_key, filename, file_row_number, is_generated(finish_reason) AS generated,
           row_number() OVER (PARTITION BY gen_key
                              ORDER BY is_generated(finish_reason) DESC, finished_at, filename, file_row_number) AS rank
    FROM parts r
    WHERE (is_generated(finish_reason) OR is_ended(finish_reason))
      AND NOT EXISTS (SELECT 1 FROM refit_rows x
                      WHERE x.filename = r.filename AND x.file_row_number = r.file_row_number)
)
WHERE rank = 1;

CREATE OR REPLACE TEMP TABLE winners AS
SELECT gen_key, filename, file_row_number FROM final_rows WHERE generated;

CREATE OR REPLACE TEMP TABLE turn_winners AS
SELECT r.base_key, r.turn, w.gen_key, w.filename, w.file_row_number
FROM winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number
WHERE r.base_key IN (SELECT gen_key FROM prompts);

-- Stale rows, counted alike by status and the report: finished (generated) rows whose conversation (base_key; a row
-- without one, its gen_key) is no current prompts row (another model, template or sampling, or a prompt no longer
-- configured), or that no longer fit their conversation's context. Aborted and ended rows are no results, so never
-- stale: no prompt set's dataset would use them.
CREATE OR REPLACE TEMP TABLE stale_rows AS
SELECT filename, file_row_number FROM parts
WHERE is_generated(finish_reason) AND coalesce(base_key, gen_key) NOT IN (SELECT gen_key FROM prompts)
UNION ALL
SELECT r.filename, r.file_row_number FROM refit_rows JOIN parts r USING (filename, file_row_number)
WHERE is_generated(r.finish_reason);

CREATE OR REPLACE TEMP TABLE outcomes AS
WITH done AS (
    SELECT base_key, count(*) AS generated_turns FROM turn_winners GROUP BY base_key
), exhausted AS (
    -- the ends that count: an end superseded by a generated row, or at a turn that fits the context now (the context
    -- grew and the conversation goes on), is no end
    SELECT r.base_key, min(r.turn) AS turn, max(r.error) AS error
    FROM final_rows f JOIN parts r USING (filename, file_row_number)
    WHERE NOT f.generated GROUP BY r.base_key
), aborted AS (
    SELECT base_key, min(turn) AS turn, max(error) AS error FROM parts
    WHERE finish_reason = 'abort' AND gen_key NOT IN (SELECT gen_key FROM winners) GROUP BY base_key
), ends AS (
    SELECT p.prompt_id, p.gen_key, p.source, len(p.turns) AS turns, coalesce(d.generated_turns, 0) AS generated_turns,
           CASE WHEN coalesce(d.generated_turns, 0) >= len(p.turns) THEN 'complete'
                WHEN e.base_key IS NOT NULL THEN 'context_exhausted'
                WHEN f.base_key IS NOT NULL THEN 'failed' END AS end_reason,
           coalesce(f.error, e.error) AS error, f.turn AS aborted_turn
    FROM prompts p
    LEFT JOIN done d ON d.base_key = p.gen_key
    LEFT JOIN exhausted e ON e.base_key = p.gen_key
    LEFT JOIN aborted f ON f.base_key = p.gen_key
)
SELECT prompt_id, gen_key, source,
       CASE WHEN end_reason IN ('complete', 'context_exhausted') THEN 'generated'
            WHEN end_reason = 'failed' THEN 'failed'
            ELSE 'missing' END AS outcome,
       error, end_reason, turns, generated_turns,
       CASE WHEN end_reason = 'failed' THEN aborted_turn END AS failed_turn
FROM ends;
