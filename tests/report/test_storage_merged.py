"""The storage plan of a merged run is its own files: each file's rows and bytes as they are on disk (the text
exports hold only the conversations they carry, reasoning.jsonl only those with reasoning), and the top-k sidecar
on one line of its own, never also as a file row of the pilot's (possibly empty) sidecar."""

import json

import pyarrow.parquet as pq

from shardgen.merge.stage import run as merge_step
from shardgen.report import storage_plan, storage_sizes

from helpers import stage


def rows_on_disk(path):
    if path.suffix == ".parquet":
        return pq.read_metadata(path).num_rows
    return len(path.read_text().splitlines()) if path.suffix == ".jsonl" else None


def test_a_merged_run_plans_the_rows_and_bytes_of_its_own_files(make_config, write_jsonl, demo_model):
    rows = [{"query": f"Write a long story about the number {i}."} for i in range(8)]
    config = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                         shards=1, capture={"logprobs": True, "top_k": 2})
    layout = stage(config, 1)
    merge_step(config, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    manifest = json.loads(layout.exports_manifest.read_text())
    text = manifest["text_exports"]
    assert text["text_conversations_left_out"] > 0  # the demo model's answers are cut: the text exports hold fewer

    result = storage_plan.plan(layout, demo_model, topk=2)
    files = {f["file"]: f for f in result["files"]}
    on_disk = storage_sizes.files(layout)
    assert set(files) == set(on_disk) and "turns.topk.parquet" not in files
    for name, path in on_disk.items():
        assert (files[name]["rows"], files[name]["bytes"]) == (rows_on_disk(path), path.stat().st_size), name
    assert files["messages.jsonl"]["rows"] == 8 - text["text_conversations_left_out"] < 8
    assert files["sharegpt.jsonl"]["rows"] == files["messages.jsonl"]["rows"] - \
        manifest["sharegpt"]["conversations_left_out"]
    assert files["reasoning.jsonl"]["rows"] == 0
    sidecar = layout.export("turns.topk.parquet")
    assert result["topk_sidecar"]["this_run"] == {"rows": pq.read_metadata(sidecar).num_rows,
                                                  "bytes": sidecar.stat().st_size}
    assert result["topk_sidecar"]["this_run"]["rows"] == 8
    printed = storage_plan.render(result).splitlines()
    sidecar_lines = [line for line in printed if line.startswith("top-k sidecar") or "turns.topk" in line]
    assert len(sidecar_lines) == 1 and "this run's file: 8 rows" in sidecar_lines[0], sidecar_lines
