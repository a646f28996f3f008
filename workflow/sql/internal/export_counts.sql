-- What the text exports left out under exports.on_length and what the reasoning split found, for the exports'
-- manifest: generated conversations and turns, turns cut by length, turns that stopped on a token other than the
-- template's end of turn (export_rule; Qwen3's <|endoftext|>), the turns and conversations the text exports
-- do not carry, the conversations they end before a cut turn, and the answers split or flagged unclosed.
-- requires: conversations, text_turns
WITH generated AS (
    SELECT conversation_id, max(turn) AS turns FROM turns GROUP BY conversation_id
)
SELECT (SELECT count(*) FROM generated) AS conversations,
       (SELECT count(*) FROM turns) AS turns,
       (SELECT count(*) FROM turns WHERE finish_reason <> 'stop') AS turns_cut_by_length,
       (SELECT count(*) FROM turns WHERE finish_reason = 'stop'
            AND output_ids[-1] <> coalesce((SELECT end_of_turn_id FROM export_rule), output_ids[-1]))
           AS turns_stopped_on_other_token,
       (SELECT count(*) FROM turns) - (SELECT count(*) FROM text_turns) AS text_turns_left_out,
       (SELECT count(*) FROM generated) - (SELECT count(*) FROM conversations) AS text_conversations_left_out,
       (SELECT count(*) FROM conversations c JOIN generated g USING (conversation_id) WHERE c.turns < g.turns)
           AS text_conversations_ended_early,
       (SELECT count(*) FROM turns WHERE reasoning_of(completion) IS NOT NULL) AS answers_with_reasoning,
       (SELECT count(*) FROM turns WHERE reasoning_unclosed(completion)) AS answers_reasoning_unclosed
