"""The results tree the contracts name, as Layout spells it (the rules and every step take their paths from it)."""

from pathlib import Path

from shardgen import layout as L
from shardgen.layout import Layout


def test_the_contract_paths():
    lay = Layout(Path("results"))
    assert str(lay.split(7)) == "results/split/shard-007.parquet"
    assert str(lay.shard_dir(7)) == "results/generate/shard-007"
    assert str(lay.done(7)) == "results/generate/shard-007.done.json"
    assert str(lay.shard_failed(7)) == "results/generate/shard-007/failed.parquet"
    assert str(lay.prompts) == "results/prompts/prompts.parquet"
    assert str(lay.dataset) == "results/dataset/data.parquet"
    assert str(lay.train) == "results/dataset/train.jsonl"
    assert str(lay.failed) == "results/merge/failed.parquet"
    assert str(lay.report.figure("shards")) == "results/report/figures/shards.png"
    assert str(lay.report.summary) == "results/report/summary.json"
    assert str(lay.status_cache(lay.shard_dir(7))) == "results/.shardgen/status-cache/shard-007.parquet"
    assert str(lay.log("generate", 7)) == "results/logs/generate/shard-007.log"
    assert str(lay.benchmark("merge")) == "results/benchmarks/merge.tsv"
    assert str(lay.tune_dir) == "results/tune"
    assert L.part_path(lay.shard_dir(7), 12).name == "part-00012.parquet"
    assert L.telemetry_path(lay.shard_dir(7), 3).name == "telemetry-00003.parquet"
    assert lay.done_of(lay.shard_dir(7)) == lay.done(7)


def test_the_rules_wildcard_is_kept_as_it_is():
    lay = Layout(Path("results"))
    assert str(lay.done(L.SHARD_WILDCARD)) == "results/generate/shard-{shard}.done.json"
    assert str(lay.split(L.SHARD_WILDCARD)) == "results/split/shard-{shard}.parquet"
    assert L.shard_ids(3) == ["000", "001", "002"]


def test_numbers_are_read_back_from_names(tmp_path):
    lay = Layout(tmp_path)
    lay.split_dir.mkdir()
    for shard in (2, 0, 11):
        lay.split(shard).touch()
    assert lay.split_shards() == [0, 2, 11]
    folder = lay.shard_dir(0)
    folder.mkdir(parents=True)
    assert L.next_number(L.part_files(folder)) == 0
    L.part_path(folder, 0).touch()
    L.part_path(folder, 4).touch()
    assert L.next_number(L.part_files(folder)) == 5
    assert L.file_number(L.telemetry_path(folder, 9)) == 9
