"""Answers the model ended at once (only its end-of-turn token: an empty text). FastChat's own data code
(fastchat/train/train_with_template.py, `SupervisedDataset`) trains an answer's text without its end of turn, so an
empty answer trains nothing, and, inside a conversation, its masking slips onto the next user turn's text: so
sharegpt.jsonl and train.jsonl end a conversation before its first empty answer (left out where that is its first)
and the exports' manifest counts them with the reason. The token exports and messages.jsonl keep every turn (the
end-of-turn token is the model's, and their loaders train it)."""

import json

from merge_runs import scripted_run, spans

# conversation name -> (system prompt, [(user text, answer text, finish_reason), ...]) as merge_runs.SCRIPT
EMPTY_SCRIPT = {
    "empty_one": (None, [("Say nothing.", "", "stop")]),
    "empty_two": (None, [("Stay quiet.", "", "stop"), ("Still quiet?", "", "stop")]),
    "empty_then_answer": (None, [("Wait.", "", "stop"), ("Now answer.", "Here it is.", "stop")]),
    "answer_then_empty": (None, [("Go on.", "Done.", "stop"), ("Anything else?", "", "stop")]),
    "plain": (None, [("Say hello.", "Hello there.", "stop")]),
}


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_fastchat_exports_train_only_answers_and_count_what_they_leave_out(qwen3_real_model, tmp_path):
    from fastchat.train.train_with_template import SupervisedDataset
    from transformers import AutoTokenizer

    config, layout, by_name, _ = scripted_run(qwen3_real_model, tmp_path, script=EMPTY_SCRIPT)
    assert [row["completion"] for row in by_name["empty_two"]] == ["", ""]  # each answer: the end-of-turn token only
    tokenizer = AutoTokenizer.from_pretrained(config.model.path, model_max_length=4096, padding_side="right")
    for path in (layout.train, layout.export("sharegpt.jsonl")):
        raw = rows_of(path)
        dataset = SupervisedDataset(raw, tokenizer, template_id=str(config.model.path))
        trained = [[tokenizer.decode(span) for span in spans(row["input_ids"], (row["labels"] != -100).long())]
                   for row in dataset]
        # a row per conversation with a non-empty first answer, each training exactly its answers' text
        assert sorted(trained) == [["Done."], ["Hello there."]], (path, trained)
    counted = json.loads(layout.exports_manifest.read_text())["sharegpt"]
    assert (counted["conversations_left_out"], counted["conversations_ended_early"]) == (3, 1)
    assert "empty answer" in counted["reason"]
    assert len(rows_of(layout.export("messages.jsonl"))) == 5  # SpecForge trains each end-of-turn token
    assert len(rows_of(layout.export("turns.jsonl"))) == 8  # every generated turn, as generated
