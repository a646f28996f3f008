"""Every user query runs on a generated, merged results tree; internal queries refuse by name; --config names the
results folder."""

import pytest

from shardgen.store import db
from shardgen.generate import checkpoint
from shardgen.cli import main
from shardgen.merge.dataset import merge

from helpers import stage


@pytest.fixture(scope="module")
def results(tmp_path_factory, demo_model):
    import yaml

    from shardgen.config import Config
    from conftest import REPO

    tmp = tmp_path_factory.mktemp("queries")
    (tmp / "a.jsonl").write_text("".join(f'{{"query": "What is {i} + {i}?"}}\n' for i in range(6)))
    (tmp / "b.jsonl").write_text("".join(f'{{"question": "Name {i} colours."}}\n' for i in range(4)))
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(tmp / "results"), sources=[
        {"name": "a", "path": str(tmp / "a.jsonl"), "format": "query_response"},
        {"name": "b", "path": str(tmp / "b.jsonl"), "format": "question_answer"}])
    raw["model"]["path"] = str(demo_model)
    layout = stage(Config.from_dict(raw), 2)
    merge(layout, layout.dataset_dir / "data.parquet", layout.dataset_dir / "train.jsonl",
          layout.root / "merge" / "failed.parquet")
    return layout


@pytest.mark.parametrize("name", sorted(db.user_queries()))
def test_every_user_query_runs_on_the_results(results, name, capsys):
    assert main(["--results", str(results.root), "query", name]) == 0
    out = capsys.readouterr().out
    assert out.strip(), name


def test_tokens_shares_add_up_per_source(results):
    con = checkpoint.connect(results)
    db.define_views(con, "winners")
    rows = db.query(con, "tokens")
    assert {r["source"] for r in rows} == {"a", "b"}
    assert sum(r["rows"] for r in rows) == 10
    for source in ("a", "b"):
        assert sum(r["share_of_source"] for r in rows if r["source"] == source) == pytest.approx(1.0, abs=1e-3)


def test_internal_queries_refuse_by_name_and_list_shows_user_queries(results, capsys, caplog):
    assert main(["--results", str(results.root), "query", "shard_done"]) == 2
    assert "not a user query" in caplog.text
    assert main(["query", "--list"]) == 0
    listed = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert set(listed) == set(db.user_queries()) and "shard_done" not in listed and "winners" not in listed
    assert listed and all(purpose.strip() for purpose in listed.values())


def test_read_only_commands_take_the_results_folder_from_the_config(results, tmp_path, capsys):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"results_dir: {results.root}\n")  # an overlay: just the key these commands need
    assert main(["--config", str(overlay), "query", "tokens"]) == 0
    from_config = capsys.readouterr().out
    assert main(["--results", str(results.root), "query", "tokens"]) == 0
    assert from_config == capsys.readouterr().out and "(no rows)" not in from_config
    assert main(["--config", str(overlay), "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in lines[2:-1]] == ["True", "True"]  # both shards done, not an empty tree
