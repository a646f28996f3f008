"""docs/outputs.md's identities between summary.json's totals hold on a multi-turn run, where a conversation (counted
in `generated`) gives one dataset row per generated turn."""

from shardgen.generate import checkpoint
from shardgen.report.summary import summary
from shardgen.store import db

from helpers import run_merge, stage


def test_dataset_rows_are_the_generated_turns_not_the_generated_conversations(make_config, write_jsonl):
    conversations = [{"conversations": [{"from": "human", "value": f"Pick {i}."}, {"from": "gpt", "value": "ok"},
                                        {"from": "human", "value": "And then?"}]} for i in range(3)]
    path = write_jsonl("c.jsonl", conversations + [{"conversations": [{"from": "human", "value": "Only one?"}]}])
    layout = stage(make_config([{"name": "c", "path": path, "format": "sharegpt", "multi_turn": "each_turn"}]), 1)
    run_merge(layout)
    con = checkpoint.connect(layout)
    record = summary(con)
    generated_turns = sum(r["generated_turns"] for r in db.query(con, "accounting"))
    assert (record["generated"], record["dataset_rows"], generated_turns) == (4, 7, 7)
