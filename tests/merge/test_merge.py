"""merge and report over parts that hold the same gen_key twice: the earliest commit wins, the rest is counted."""

import json
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from shardgen.merge.dataset import AccountingError
from shardgen.report.summary import report

from helpers import stage

from helpers import run_merge


def test_twice_committed_rows_keep_the_earliest_and_are_counted(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Name a city number {i}."} for i in range(8)])
    cfg = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout = stage(cfg, 2)
    original = run_merge(layout)
    part = next(layout.shard_dir(0).glob("part-*.parquet"))
    table = pq.read_table(part)
    later = table.set_column(table.schema.get_field_index("completion"), "completion",
                             pa.array(["LATER"] * table.num_rows))
    later = later.set_column(later.schema.get_field_index("finished_at"), "finished_at",
                             pc.add(later["finished_at"], pa.scalar(timedelta(hours=1))))
    pq.write_table(later, layout.shard_dir(1) / "part-09999.parquet")
    merged = run_merge(layout)
    assert merged.num_rows == 8 and "LATER" not in merged["completion"].to_pylist()
    assert sorted(merged.to_pylist(), key=lambda r: r["prompt_id"]) == \
        sorted(original.to_pylist(), key=lambda r: r["prompt_id"])
    ds = layout.dataset_dir
    outputs = [ds / "data.parquet", ds / "train.jsonl", layout.root / "merge" / "failed.parquet"]
    summary = report(cfg, outputs, [layout.done(0), layout.done(1)], layout.report_dir)
    assert summary["duplicate_commits"] == table.num_rows and summary["stale_rows"] == 0
    assert summary["generated"] == 8
    md = (layout.report_dir / "report.md").read_text()
    assert summary["per_turn"][0]["turn"] == 1 and summary["per_turn"][0]["rows"] == 8 and "## per_turn" in md
    assert "Tail across shards:" in md and "![throughput](figures/throughput.png)" in md
    for name in ("throughput", "engine", "lengths", "shards", "outlook", "turns"):
        assert (layout.report_dir / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    # efficiency and forecast beside throughput: the CPU engine has no telemetry, so no efficiency, but a forecast
    assert [row["note"] for row in summary["efficiency"]] == ["no SGLang telemetry (CPU engine): no efficiency"] * 2
    forecast = summary["forecast"]
    assert (forecast["gpus"], forecast["device"]) == (2, "cpu")  # both shards' CPU engines, side by side
    assert forecast["tok_per_s_per_gpu"] is None  # a CPU run measured no GPU: its rate is its engines'
    assert forecast["tok_per_s_per_cpu_engine"] > 0 and forecast["hours_per_100000_prompts"] > 0
    assert "## forecast" in md and "Assumption:" in md and "## efficiency" in md


def test_merge_names_prompts_that_are_neither_generated_nor_failed(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Spell the word {i}."} for i in range(6)])
    cfg = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout = stage(cfg, 1)
    lost = next(layout.shard_dir(0).glob("part-*.parquet"))
    missing = pq.read_table(lost)["prompt_id"].to_pylist()
    lost.unlink()
    with pytest.raises(AccountingError, match="neither generated nor failed") as err:
        run_merge(layout)
    assert all(pid in str(err.value) for pid in missing)
    assert json.loads(layout.done(0).read_text())["prompts"] == 6


def test_merge_on_one_thread_writes_the_same_dataset(make_config, write_jsonl, monkeypatch):
    from shardgen.merge import dataset as merge_module

    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(10)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}]), 2)
    whole = sorted(run_merge(layout).to_pylist(), key=lambda r: r["prompt_id"])
    monkeypatch.setattr(merge_module, "ROWS_PER_THREADS", 3)
    assert sorted(run_merge(layout).to_pylist(), key=lambda r: r["prompt_id"]) == whole and len(whole) == 10
