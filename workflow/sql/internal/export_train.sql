-- dataset/train.jsonl: the rows of exports/sharegpt.jsonl with the dataset's prompt_id and source, one row per
-- conversation, so that FastChat trains each carried turn once (a row per turn with its whole history trained
-- every earlier answer again).
-- requires: sharegpt_conversations
SELECT prompt_id, source, system, conversations FROM sharegpt_conversations
