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
    # train.jsonl carries the turns that stopped (README: Exports; the demo model's answers are often cut)
    assert len(train) == sum(r["finish_reason"] == "stop" for r in dataset)
    assert all(t["conversations"][0]["from"] == "human" and t["conversations"][-1]["from"] == "gpt" for t in train)
