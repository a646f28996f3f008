"""A finished run's dataset is what the current config asks for: merge and report check every row's gen_key, and
the summary's figures name their scope and agree with each other."""

import pytest

from shardgen.merge.freshness import StaleError, check_prompt_set
from shardgen.report.summary import report

from helpers import stage
from helpers import run_merge


def outputs(layout):
    ds = layout.dataset_dir
    return [ds / "data.parquet", ds / "train.jsonl", layout.root / "merge" / "failed.parquet"]


def finish(config, shards=2):
    layout = stage(config, shards)
    run_merge(layout)
    return layout, report(config, outputs(layout), [layout.done(s) for s in range(shards)], layout.report_dir)


def test_a_dataset_made_for_other_settings_fails_the_report_naming_the_source(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(6)])
    sources = [{"name": "a", "path": path, "format": "query_response"}]
    layout, summary = finish(make_config(sources))
    assert summary["dataset_rows_checked"] == 6
    assert "Checked: all 6 dataset rows carry the gen_key" in (layout.report_dir / "report.md").read_text()

    changed = make_config(sources, defaults={"max_new_tokens": 12})  # the config now asks for other lengths
    with pytest.raises(StaleError, match=r"data.parquet is stale: 6 of 6 rows .*per source: a: 6"):
        report(changed, outputs(layout), [layout.done(0), layout.done(1)], layout.report_dir)
    with pytest.raises(StaleError, match=r"prompts.parquet is stale"):
        check_prompt_set(changed, layout.prompts, layout.prompt_table("sources"))
    more = make_config(sources + [{"name": "b", "path": path, "format": "query_response"}])
    with pytest.raises(StaleError, match=r"built without the configured source\(s\) \['b'\]"):
        check_prompt_set(more, layout.prompts, layout.prompt_table("sources"))


def test_a_dataset_older_than_its_parts_fails_the_report(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Spell {i}."} for i in range(6)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout, _ = finish(config, 1)
    next(layout.shard_dir(0).glob("part-*.parquet")).unlink()  # a lost part: the parts now hold fewer rows
    with pytest.raises(StaleError, match="has 6 rows but the parts hold 0 generated prompts"):
        report(config, outputs(layout), [layout.done(0)], layout.report_dir)


def identities(summary):
    wall, rate = summary["dataset_generation_wall_s"], summary["dataset_output_tokens_per_s"]
    assert abs(rate * wall - summary["dataset_completion_tokens"]) <= 0.05 * wall + 1e-3 * rate
    assert summary["dataset_rows"] == summary["generated"] == summary["dataset_rows_checked"]
    assert summary["parts_rows"] == summary["dataset_rows"] + summary["stale_rows"] + summary["duplicate_commits"]


def test_summary_scopes_hold_their_identities_after_a_sampling_change(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Name {i} animals."} for i in range(8)])
    sources = [{"name": "a", "path": path, "format": "query_response"}]
    _, first = finish(make_config(sources))
    identities(first)
    assert first["parts_completion_tokens"] == first["dataset_completion_tokens"]

    layout, second = finish(make_config(sources, defaults={"max_new_tokens": 12}))
    identities(second)
    assert second["stale_rows"] == 8 and second["parts_rows"] == 16
    assert second["parts_completion_tokens"] == first["dataset_completion_tokens"] + second["dataset_completion_tokens"]


def test_the_per_source_gen_key_function_is_gen_key():
    from shardgen.keys import gen_key, gen_key_of

    fingerprint = {"model": "m" * 64, "tokenizer": "t", "template": "é"}
    sampling = {"max_new_tokens": 8, "temperature": 0.7, "top_p": 0.95, "top_k": -1, "extra": '{"a": "ü"}'}
    pid = "ab" * 32
    assert gen_key_of(fingerprint, sampling)(pid) == gen_key(pid, fingerprint, sampling)
