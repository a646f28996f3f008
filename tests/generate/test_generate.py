import json

import pyarrow.parquet as pq

from shardgen.merge.dataset import merge

from helpers import stage, part_rows


def test_resplit_added_prompts_and_changed_sampling(make_config, write_jsonl):
    first = write_jsonl("a.jsonl", [{"query": f"What is {i} + {i}?"} for i in range(12)])
    config = make_config([{"name": "a", "path": first, "format": "query_response"}])
    layout = stage(config, 2)
    rows = part_rows(layout)
    assert len(rows) == 12 and {r["shard"] for r in rows} == {0, 1}
    done = json.loads(layout.done(0).read_text())
    assert done["generated"] + json.loads(layout.done(1).read_text())["generated"] == 12
    assert done["engine"]["backend"] == "transformers" and done["attempts"][0]["attempt"] == 1
    assert all(r["completion_tokens"] == len(r["output_ids"]) > 0 for r in rows)
    assert all(r["finish_reason"] in ("stop", "length") for r in rows)

    # Re-split into 3 shards: every gen_key is committed somewhere, nothing is generated again.
    stage(config, 3)
    assert len(part_rows(layout)) == 12
    assert json.loads(layout.done(2).read_text())["engine"] is None  # no engine started

    # More prompts: only the new ones are generated.
    more = write_jsonl("b.jsonl", [{"question": f"Name {i} colours."} for i in range(5)])
    config = make_config([{"name": "a", "path": first, "format": "query_response"},
                          {"name": "b", "path": more, "format": "question_answer"}])
    stage(config, 3)
    assert len(part_rows(layout)) == 17

    # Changed sampling: new gen_keys for "a", old output never reused; merge takes only current rows.
    config = make_config([{"name": "a", "path": first, "format": "query_response", "sampling": {"temperature": 0.0}},
                          {"name": "b", "path": more, "format": "question_answer"}])
    stage(config, 3)
    assert len(part_rows(layout)) == 29
    merge(layout, layout.dataset_dir / "data.parquet", layout.dataset_dir / "train.jsonl",
          layout.root / "merge" / "failed.parquet")
    dataset = pq.read_table(layout.dataset_dir / "data.parquet").to_pylist()
    current = {r["prompt_id"]: r["gen_key"] for r in pq.read_table(layout.prompts).to_pylist()}
    assert len(dataset) == 17 and len({r["prompt_id"] for r in dataset}) == 17
    newest = {r["gen_key"]: r for r in part_rows(layout)}
    for row in dataset:
        assert newest[current[row["prompt_id"]]]["output_ids"] == row["output_ids"]
    train = [json.loads(line) for line in (layout.dataset_dir / "train.jsonl").read_text().splitlines()]
    # train.jsonl carries the turns that stopped (docs/trainers.md; the demo model's answers are often cut)
    assert len(train) == sum(r["finish_reason"] == "stop" for r in dataset)
    assert all(t["conversations"][0]["from"] == "human" and t["conversations"][-1]["from"] == "gpt" for t in train)


def test_listed_temperature_is_sent_per_request_and_recorded(make_config, write_jsonl, monkeypatch):
    """A source's `temperature: [0.2, 0.9]`: each prompt's request is sampled at its prompts row's value (what the
    CPU engine was asked), and its part row and dataset row record it; a changed list makes new gen_keys."""
    from shardgen.engines.transformers.engine import TransformersEngine

    sent = {}
    generate_batch = TransformersEngine._generate_batch

    def recording(self, requests):
        for r in requests:
            sent[tuple(r.prompt_ids)] = dict(r.sampling)
        return generate_batch(self, requests)

    monkeypatch.setattr(TransformersEngine, "_generate_batch", recording)
    path = write_jsonl("a.jsonl", [{"query": f"What is {i} + {i}?"} for i in range(12)])
    source = {"name": "a", "path": path, "format": "query_response",
              "sampling": {"temperature": [0.2, 0.9], "top_k": [3, 7], "max_new_tokens": 8}}
    layout = stage(make_config([source]), 2)
    prompts = {r["prompt_id"]: r for r in pq.read_table(layout.prompts).to_pylist()}
    assert {r["temperature"] for r in prompts.values()} == {0.2, 0.9}
    for row in prompts.values():
        asked = sent[tuple(row["prompt_ids"])]
        assert (asked["temperature"], asked["top_k"], asked["top_p"]) == (row["temperature"], row["top_k"],
                                                                         row["top_p"])
    parts = part_rows(layout)
    assert len(parts) == 12
    for part in parts:
        row = prompts[part["prompt_id"]]
        assert (part["temperature"], part["top_p"], part["top_k"]) == (row["temperature"], row["top_p"], row["top_k"])
    dataset = pq.read_table(merge_dataset(layout)).to_pylist()
    assert len(dataset) == 12
    for got in dataset:
        row = prompts[got["prompt_id"]]
        assert (got["temperature"], got["top_p"], got["top_k"]) == (row["temperature"], row["top_p"], row["top_k"])

    # Another list: every gen_key changes, so every prompt is generated again.
    layout = stage(make_config([{**source, "sampling": {**source["sampling"], "temperature": [0.9, 0.2]}}]), 2)
    changed = {r["prompt_id"]: r["gen_key"] for r in pq.read_table(layout.prompts).to_pylist()}
    assert all(changed[pid] != row["gen_key"] for pid, row in prompts.items())
    assert len(part_rows(layout)) == 24


def test_unset_sampling_is_the_model_generation_config_and_each_value_records_its_origin(make_config, write_jsonl,
                                                                                        monkeypatch):
    """The demo model's generation_config.json (temperature 0.6, top_p 0.95, top_k 20) samples a source that sets
    nothing; a value in `defaults` or a source's `sampling` wins. The CPU engine is asked with the resolved
    values; the prompts rows, the part rows, the dataset and the manifest's provenance carry them, with where each
    came from."""
    from shardgen.engines.transformers.engine import TransformersEngine
    from shardgen.merge.provenance import provenance

    sent = []
    generate_batch = TransformersEngine._generate_batch

    def recording(self, requests):
        sent.extend(dict(r.sampling) for r in requests)
        return generate_batch(self, requests)

    monkeypatch.setattr(TransformersEngine, "_generate_batch", recording)
    unset = {"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"What is {i} + {i}?"} for i in range(4)]),
             "format": "query_response"}
    explicit = {"name": "b", "path": write_jsonl("b.jsonl", [{"query": f"Name {i} birds."} for i in range(4)]),
                "format": "query_response", "sampling": {"temperature": 0.3}}
    config = make_config([unset, explicit],
                         defaults={"max_new_tokens": 8, "repetition_penalty": 1.1})
    layout = stage(config, 2)
    from_model = {"temperature": "generation_config", "top_p": "generation_config", "top_k": "generation_config",
                  "min_p": "neutral", "repetition_penalty": "config.defaults"}
    expected = {"a": ((0.6, 0.95, 20, 0.0, 1.1), from_model),
                "b": ((0.3, 0.95, 20, 0.0, 1.1), {**from_model, "temperature": "source"})}
    fields = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
    for row in pq.read_table(layout.prompts).to_pylist():
        values, origin = expected[row["source"]]
        assert (tuple(row[f] for f in fields), json.loads(row["sampling_origin"])) == (values, origin)
    assert sorted(tuple(s[f] for f in fields) for s in sent) == sorted([expected["a"][0]] * 4 + [expected["b"][0]] * 4)
    dataset = pq.read_table(merge_dataset(layout)).to_pylist()
    assert len(dataset) == 8
    for row in dataset:
        values, origin = expected[row["source"]]
        assert (tuple(row[f] for f in fields), json.loads(row["sampling_origin"])) == (values, origin)
    recorded = provenance(config, layout)["sampling_per_source"]
    for name, (values, origin) in expected.items():
        assert recorded[name] == [{"max_new_tokens": 8, **dict(zip(fields, values)), "origin": origin}]


def merge_dataset(layout):
    path = layout.dataset_dir / "data.parquet"
    merge(layout, path, layout.dataset_dir / "train.jsonl", layout.root / "merge" / "failed.parquet")
    return path


def test_a_part_written_before_the_sampling_columns_reads_them_as_null(make_config, write_jsonl):
    """Parts committed by an older shardgen (no temperature/top_p/top_k columns) still merge, beside newer parts:
    the parts view reads by column name, the missing sampling as null."""
    import glob

    path = write_jsonl("a.jsonl", [{"query": f"What is {i} + {i}?"} for i in range(6)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response",
                                 "sampling": {"max_new_tokens": 8}}]), 2)
    old = sorted(glob.glob(str(layout.shard_dir(0) / "part-*.parquet")))
    assert old
    for part in old:
        pq.write_table(pq.read_table(part).drop_columns(["temperature", "top_p", "top_k"]), part)
    dataset = pq.read_table(merge_dataset(layout)).to_pylist()
    assert len(dataset) == 6
    from_old = {r["gen_key"] for part in old for r in pq.read_table(part).to_pylist()}
    assert 0 < len(from_old) < 6
    for row in dataset:
        expected = (None, None, None) if row["gen_key"] in from_old else (0.6, 0.95, 20)  # the demo model's
        assert (row["temperature"], row["top_p"], row["top_k"]) == expected
