import numpy as np
import pyarrow.parquet as pq

from shardgen.split import assign, split

from test_prompts import run


def test_assign_is_balanced_and_deterministic():
    rng = np.random.default_rng(0)
    costs = rng.integers(10, 4000, size=5000)
    ids = [f"{i:08x}" for i in range(5000)]
    shard_of, _ = assign(costs, ids, 8)
    loads = np.bincount(shard_of, weights=costs, minlength=8)
    assert loads.max() - loads.min() <= costs.max()  # LPT bound: within one prompt's cost
    assert (assign(costs, ids, 8)[0] == shard_of).all()


def test_split_covers_every_prompt_once(make_config, write_jsonl, tmp_path):
    path = write_jsonl("q.jsonl", [{"query": f"Question number {i}: " + "why? " * (i % 17)} for i in range(60)])
    config = make_config([{"name": "q", "path": path, "format": "query_response"}])
    run(config, tmp_path)
    loads = split(tmp_path / "prompts" / "prompts.parquet", tmp_path / "split", 3)
    shards = [pq.read_table(tmp_path / "split" / f"shard-{s:03d}.parquet") for s in range(3)]
    ids = [i for t in shards for i in t["prompt_id"].to_pylist()]
    assert sorted(ids) == sorted(pq.read_table(tmp_path / "prompts" / "prompts.parquet")["prompt_id"].to_pylist())
    assert max(loads) - min(loads) <= max(t["prompt_tokens"].to_numpy().max() + 24 for t in shards)
    assert shards[0].schema == pq.read_schema(tmp_path / "prompts" / "prompts.parquet")
