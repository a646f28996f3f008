import numpy as np
import pyarrow.parquet as pq

from shardgen.prompts.split import Balancer, split

from helpers import run


def test_placement_is_balanced_and_the_same_in_any_batches():
    costs = np.sort(np.random.default_rng(0).integers(10, 4000, size=5000))[::-1]  # heaviest first, as split sorts
    whole = Balancer(8)
    shard_of = whole.place(costs)
    loads = np.bincount(shard_of, weights=costs, minlength=8)
    assert loads.max() - loads.min() <= costs.max()  # LPT bound: within one prompt's cost
    assert list(loads) == whole.loads
    batched = Balancer(8)
    assert (np.concatenate([batched.place(costs[i:i + 333]) for i in range(0, 5000, 333)]) == shard_of).all()


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


def test_split_streams_within_its_memory_limit_and_leaves_no_spill(make_config, write_jsonl, tmp_path, monkeypatch):
    from shardgen.prompts import split as split_module

    monkeypatch.setattr(split_module, "BATCH_ROWS", 16)  # many sorted batches, several row groups per shard
    path = write_jsonl("q.jsonl", [{"query": f"Question {i}: " + "why? " * (i % 23)} for i in range(300)])
    run(make_config([{"name": "q", "path": path, "format": "query_response"}]), tmp_path)
    prompts = pq.read_table(tmp_path / "prompts" / "prompts.parquet")
    loads = split(tmp_path / "prompts" / "prompts.parquet", tmp_path / "split", 4, memory_limit="64MB")
    shards = [pq.read_table(tmp_path / "split" / f"shard-{s:03d}.parquet") for s in range(4)]
    # the same placement as LPT over the whole table at once, heaviest first, ties by prompt_id
    order = sorted(range(prompts.num_rows), key=lambda i: (-(prompts["prompt_tokens"][i].as_py() + 24),
                                                          prompts["prompt_id"][i].as_py()))
    expected = Balancer(4).place(np.array([prompts["prompt_tokens"][i].as_py() + 24 for i in order]))
    for s in range(4):
        assert shards[s]["prompt_id"].to_pylist() == [prompts["prompt_id"][order[i]].as_py()
                                                      for i in np.flatnonzero(expected == s)]
    assert loads == [int(sum(t["prompt_tokens"].to_numpy()) + 24 * t.num_rows) for t in shards]
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == [f"shard-{s:03d}.parquet" for s in range(4)]
