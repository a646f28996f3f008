"""A conversation whose turn 1 was generated and whose turn 2 the engine aborted: the generated turn stays in the
dataset (an exact generation, as the turns before a conversation's context ran out do), the conversation counts as
failed, and merge, failed.parquet, the summary and the report's check count it the same way; `shardgen retry`
then continues it from turn 2."""

import duckdb
import pyarrow.parquet as pq
import pytest

from shardgen.generate.retry import retry_failed
from shardgen.merge.freshness import StaleError
from shardgen.report.summary import report

from helpers import run_merge, stage

CONVERSATIONS = [
    {"conversations": [{"from": "human", "value": "Name a pear."}, {"from": "gpt", "value": "Conference."},
                       {"from": "human", "value": "And the apples?"}, {"from": "gpt", "value": "Gala."}]},
    {"conversations": [{"from": "human", "value": "Name a plum."}, {"from": "gpt", "value": "Damson."}]},
    {"conversations": [{"from": "human", "value": "Count the apples."}, {"from": "gpt", "value": "Three."}]},
]


def finish(config, layout):
    run_merge(layout)
    return report(config, [layout.dataset, layout.train, layout.failed], [layout.done(0)], layout.report_dir)


def test_a_partly_failed_conversation_keeps_its_generated_turn_and_the_run_finishes(make_config, write_jsonl,
                                                                                     monkeypatch):
    path = write_jsonl("chat.jsonl", CONVERSATIONS)
    config = make_config([{"name": "chat", "path": path, "format": "sharegpt", "multi_turn": "each_turn"}])
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:apples")
    layout = stage(config, 1)
    monkeypatch.delenv("SHARDGEN_FAULT")
    summary = finish(config, layout)  # the report's check used to refuse: 2 rows, 1 generated prompt

    dataset = pq.read_table(layout.dataset, columns=["conversation_id", "turn"]).to_pylist()
    prompts = {r["turns"][0]: r["prompt_id"] for r in pq.read_table(layout.prompts).to_pylist()}
    pear, plum, apples = prompts["Name a pear."], prompts["Name a plum."], prompts["Count the apples."]
    assert sorted((r["conversation_id"], r["turn"]) for r in dataset) == sorted([(pear, 1), (plum, 1)])
    failed = {r["prompt_id"]: r for r in pq.read_table(layout.failed).to_pylist()}
    assert set(failed) == {pear, apples}
    assert (failed[pear]["turn"], failed[pear]["generated_turns"]) == (2, 1)  # turn 1 kept, turn 2 failed
    assert (failed[apples]["turn"], failed[apples]["generated_turns"]) == (1, 0)
    assert "simulated engine abort" in failed[pear]["error"]
    shard_failed = pq.read_table(layout.shard_failed(0)).to_pylist()
    assert sorted((r["prompt_id"], r["turn"], r["generated_turns"]) for r in shard_failed) == \
        sorted((pid, r["turn"], r["generated_turns"]) for pid, r in failed.items())
    assert (summary["generated"], summary["failed"], summary["failed_partly"]) == (1, 2, 1)
    assert summary["dataset_rows"] == summary["dataset_rows_checked"] == 2
    exported = duckdb.sql(f"SELECT count(*) FROM read_json_auto('{layout.export('turns.jsonl')}')").fetchall()[0][0]
    assert exported == 2  # the token export trains the kept turn too

    retry_failed(config)
    summary = finish(config, layout)
    assert (summary["generated"], summary["failed"], summary["failed_partly"]) == (3, 0, 0)
    assert summary["dataset_rows"] == summary["dataset_rows_checked"] == 4
    assert pq.read_table(layout.failed).num_rows == 0


def test_a_dataset_that_disagrees_with_the_parts_names_the_forced_merge(make_config, write_jsonl):
    """The report's refusal ends in a command that rebuilds the dataset, not one that stops at the same check."""
    path = write_jsonl("chat.jsonl", CONVERSATIONS[1:2])
    config = make_config([{"name": "chat", "path": path, "format": "sharegpt", "multi_turn": "each_turn"}])
    layout = stage(config, 1)
    finish(config, layout)
    next(layout.shard_dir(0).glob("part-*.parquet")).unlink()
    with pytest.raises(StaleError, match=r"snakemake --forcerun merge"):
        report(config, [layout.dataset, layout.train, layout.failed], [layout.done(0)], layout.report_dir)
