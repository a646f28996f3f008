-- The run's generation clock: the time during which some shard generated. Each (shard, attempt)'s span (first
-- submission to last completion) of a set of rows, and the spans merged where they overlap into islands, each
-- placed at the generation seconds before it (offset_s). The time when no shard generated (shards waiting for a
-- GPU or a core, a rerun days later) is left out: the run's generation wall is the islands' total, and shards count
-- as side by side only where they were. dataset_clock: the spans of the dataset's rows (turn_winners; the headline's
-- clock); parts_clock: of every committed row (what the engines did). One row per span; at_once: the most spans
-- under way at one moment.
-- requires: winners
CREATE OR REPLACE TEMP MACRO clock(made) AS TABLE
WITH spans AS (
    SELECT shard, attempt, min(submitted_at) AS first_submit, max(finished_at) AS last_finish
    FROM query_table(made) GROUP BY shard, attempt
), reached AS (
    SELECT *, max(last_finish) OVER (ORDER BY first_submit, shard, attempt
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM spans
), numbered AS (
    SELECT *, count(*) FILTER (reach IS NULL OR first_submit > reach)
                  OVER (ORDER BY first_submit, shard, attempt ROWS UNBOUNDED PRECEDING) AS island
    FROM reached
), islands AS (
    SELECT island, min(first_submit) AS island_start, epoch(max(last_finish) - min(first_submit)) AS island_s
    FROM numbered GROUP BY island
), placed AS (
    SELECT *, coalesce(sum(island_s) OVER (ORDER BY island ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                  AS offset_s
    FROM islands
)
SELECT n.shard, n.attempt, n.first_submit, n.last_finish, p.island_start, p.island_s, p.offset_s
FROM numbered n JOIN placed p USING (island);

CREATE OR REPLACE TEMP MACRO clock_wall(made) AS
    (SELECT coalesce(max(offset_s + island_s), 0) FROM clock(made));

CREATE OR REPLACE TEMP MACRO at_once(made) AS
    (SELECT coalesce(max(running), 0) FROM (
        SELECT sum(step) OVER (ORDER BY moment, step ROWS UNBOUNDED PRECEDING) AS running
        FROM (SELECT first_submit AS moment, 1 AS step FROM clock(made)
              UNION ALL SELECT last_finish, -1 FROM clock(made))));

CREATE OR REPLACE TEMP VIEW dataset_made AS
SELECT r.shard, r.attempt, r.submitted_at, r.finished_at, r.completion_tokens
FROM turn_winners w JOIN parts r ON r.filename = w.filename AND r.file_row_number = w.file_row_number;
