-- What FastChat's rows (sharegpt.jsonl, train.jsonl) leave out of the text conversations, for the exports'
-- manifest: the conversations whose first answer is empty (left out) and those ended before a later empty answer.
-- requires: conversations, sharegpt_conversations
SELECT (SELECT count(*) FROM conversations) - (SELECT count(*) FROM sharegpt_conversations) AS conversations_left_out,
       (SELECT count(*) FROM sharegpt_conversations s JOIN conversations c USING (conversation_id)
            WHERE len(s.conversations) < 2 * c.turns) AS conversations_ended_early
