"""generate/retry.py on its own: only the shards whose done record counts failures are generated again, each
failed prompt once more, and their done records rewritten; a shard without failures is left as it is."""

import json

from shardgen.generate.retry import retry_failed

from helpers import part_rows, stage


def test_only_the_shards_with_failures_are_retried(make_config, write_jsonl, monkeypatch):
    rows = [{"query": f"Count the {'apples' if i == 0 else 'pears'} {i}."} for i in range(8)]
    config = make_config([{"name": "a", "path": write_jsonl("a.jsonl", rows), "format": "query_response"}])
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:apples")
    layout = stage(config, 2)
    monkeypatch.delenv("SHARDGEN_FAULT")
    failed = {s: json.loads(layout.done(s).read_text())["failed"] for s in (0, 1)}
    assert sorted(failed.values()) == [0, 1]
    untouched = {s: layout.done(s).read_bytes() for s in (0, 1) if failed[s] == 0}
    (retried,) = (s for s in (0, 1) if failed[s])
    prompts = json.loads(layout.done(retried).read_text())["prompts"]
    before = len(part_rows(layout))

    (clean,) = untouched
    assert retry_failed(config, shards=[clean]) == {"retried_shards": {}}  # only the shards named
    assert len(part_rows(layout)) == before and json.loads(layout.done(retried).read_text())["failed"] == 1
    got = retry_failed(config)
    assert got == {"retried_shards": {retried: {"generated": prompts, "failed": 0}}}
    assert len(part_rows(layout)) == before + 1  # the failed prompt once more, nothing else
    assert all(layout.done(s).read_bytes() == data for s, data in untouched.items())
    assert all(json.loads(layout.done(s).read_text())["failed"] == 0 for s in (0, 1))
    assert retry_failed(config) == {"retried_shards": {}}  # nothing failed any more
