-- The dataset's rows (merged_rows: the dataset query) with each answer split at the model's reasoning tags:
-- content (the visible answer; the whole completion where nothing was split), reasoning_content (null: none, or
-- never closed) and reasoning_unclosed (opened and never closed: flagged, not split).
SELECT *, content_of(completion) AS content, reasoning_of(completion) AS reasoning_content,
       reasoning_unclosed(completion) AS reasoning_unclosed
FROM merged_rows
