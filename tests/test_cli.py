"""The user-facing commands on a small generated results tree: status, query, reset."""

import pyarrow.parquet as pq

from shardgen.cli import main

from test_generate import part_rows, stage


def test_status_query_and_reset(make_config, write_jsonl, capsys):
    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(6)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout = stage(config, 2)
    results = str(layout.root)

    assert main(["--results", results, "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["shard", "prompts", "committed", "done", "rate_per_s", "eta_s"]
    assert [line.split()[:4] for line in lines[2:]] == [["0", "3", "3", "True"], ["1", "3", "3", "True"]]

    (layout.shard_dir(0) / "parts-index.jsonl").unlink()  # as if killed between a part's rename and its index line
    assert main(["--results", results, "status"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[:3] == ["0", "3", "3"]  # footers fill the gap

    assert main(["--results", results, "query", "throughput"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["requests", "completion_tokens"]
    assert int(out[2].split()[0]) == 6
    assert main(["--results", results, "query", "nope"]) == 2

    before = len(part_rows(layout))
    assert main(["--results", results, "reset", "1"]) == 0
    assert "snakemake -R" in capsys.readouterr().out
    assert not layout.done(1).exists() and not layout.shard_dir(1).exists()
    moved = list(layout.reset_dir.glob("shard-001-*/part-*.parquet"))
    assert moved and len(part_rows(layout)) < before  # moved aside, out of the committed set, not deleted
    stage(config, 2)
    assert len(part_rows(layout)) == before
    assert sum(pq.read_metadata(p).num_rows for p in moved) == 3
