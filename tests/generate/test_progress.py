"""Shard state as `shardgen status` reads it through the checkpoint: only rows of the current prompt set count,
stale ones are reported apart; a waiting shard never makes the run look done; a Ctrl-C is an interruption, not a
kill; no "None" on screen."""

import pytest

from shardgen.store import db
from shardgen.cli import main
from shardgen.generate import checkpoint, driver
from shardgen.generate.reset import reset_shard
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts
from shardgen.report import eta
from shardgen.report.status import status

from helpers import generate, part_rows, stage


def _config(make_config, write_jsonl, **sampling):
    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(8)])
    return make_config([{"name": "a", "path": path, "format": "query_response", "sampling": sampling}],
                       checkpoint={"every_records": 1, "every_seconds": 30}, engine={"max_running_requests": 1})


def _restage(config) -> Layout:
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    for shard in (0, 1):  # Snakemake reruns both jobs: their split files changed
        layout.done(shard).unlink(missing_ok=True)
    return layout


def _assert_not_overcounted(layout, rows, run):
    assert len(rows) == 2, rows  # one row per shard
    for row in rows:
        assert row["committed"] <= row["prompts"], row
    assert run["output_tokens_share"] is None or run["output_tokens_share"] < 1
    assert run["eta_s"] != 0


def test_a_sampling_change_then_a_partial_rerun_counts_only_current_rows(make_config, write_jsonl, capsys):
    layout = stage(_config(make_config, write_jsonl), 2)
    old = len(part_rows(layout))
    assert old == 8
    changed = _config(make_config, write_jsonl, temperature=0.1)  # every gen_key changes
    layout = _restage(changed)
    rc, err = generate(changed, layout, "mid_batch:4")  # shard 0 killed after 3 of its 4 prompts
    assert rc == -9, err[-2000:]
    new = len(part_rows(layout)) - old
    assert 0 < new < 4
    rows = status(layout)
    run = eta.annotate(layout, rows)
    assert [r["committed"] for r in rows] == [new, 0] and [r["stale_rows"] for r in rows] == [4, 4]
    assert run["stale_rows"] == old
    _assert_not_overcounted(layout, rows, run)
    assert main(["--results", str(layout.root), "status"]) == 0
    assert f"{old} stale rows on disk" in capsys.readouterr().out.splitlines()[-1]

    generate_shard(changed, 0, layout.done(0))
    reset_shard(layout, 1)  # shard 1's old parts go aside; shard 1 now waits with nothing committed
    rows = status(layout)
    run = eta.annotate(layout, rows)
    assert [(r["state"], r["committed"]) for r in rows] == [("done", 4), ("waiting", 0)]
    assert run["stale_rows"] == 4 and run["eta_s"] is None
    _assert_not_overcounted(layout, rows, run)


def test_status_prints_no_none(make_config, write_jsonl, capsys):
    config = _config(make_config, write_jsonl)
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    generate_shard(config, 0, layout.done(0))  # shard 1 waits: no rate, ETA, tokens/s or running count
    assert main(["--results", str(layout.root), "status"]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and "no ETA yet" in out.splitlines()[-1]


def test_a_ctrl_c_shows_as_interrupted_not_killed(make_config, write_jsonl, monkeypatch, capsys):
    config = _config(make_config, write_jsonl)
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "run_prompts", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        generate_shard(config, 0, layout.done(0))
    assert status(layout)[0]["state"] == "interrupted"
    assert main(["--results", str(layout.root), "status"]) == 0
    assert "INTERRUPTED: shard 0" in capsys.readouterr().out.splitlines()[-1]


def _restage_keeping_done_files(config) -> Layout:
    """prompts and split rerun after a settings change, generate not yet: the done files of the old prompt set stay."""
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    return layout


def _status_line(layout, capsys) -> str:
    assert main(["--results", str(layout.root), "status"]) == 0
    return capsys.readouterr().out.splitlines()[-1]


def test_done_files_of_an_older_prompt_set_read_stale_with_no_eta(make_config, write_jsonl, capsys):
    stage(_config(make_config, write_jsonl), 2)
    layout = _restage_keeping_done_files(_config(make_config, write_jsonl, temperature=0.1))
    rows = status(layout)
    run = eta.annotate(layout, rows)
    assert [(r["done"], r["state"], r["committed"], r["eta_s"]) for r in rows] == [(False, "stale", 0, None)] * 2
    assert run["eta_s"] is None and run["stale_rows"] == 8
    line = _status_line(layout, capsys)
    assert "ETA 0" not in line and "nothing is generating" in line


def test_a_deleted_part_leaves_the_shard_not_done(make_config, write_jsonl, capsys):
    layout = stage(_config(make_config, write_jsonl), 2)
    (layout.shard_dir(0) / "part-00001.parquet").unlink()
    rows = status(layout)
    run = eta.annotate(layout, rows)
    assert (rows[0]["done"], rows[0]["state"], rows[0]["committed"]) == (False, "stale", 3)
    assert "part-00001.parquet missing (1 rows)" in rows[0]["lost_parts"]
    assert (rows[1]["done"], rows[1]["state"]) == (True, "done")
    assert run["eta_s"] is None and run["output_tokens_share"] < 1
    assert "100.0%" not in _status_line(layout, capsys)


def test_no_eta_after_a_ctrl_c_with_commits(make_config, write_jsonl, monkeypatch, capsys):
    config = _config(make_config, write_jsonl)
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    commit = checkpoint.PartWriter.commit

    def ctrl_c_after_the_third(writer, rows):
        path = commit(writer, rows)
        if len(list(writer.folder.glob("part-*.parquet"))) == 3:
            raise KeyboardInterrupt
        return path

    monkeypatch.setattr(checkpoint.PartWriter, "commit", ctrl_c_after_the_third)
    with pytest.raises(KeyboardInterrupt):
        generate_shard(config, 0, layout.done(0))
    rows = status(layout)
    run = eta.annotate(layout, rows)
    assert (rows[0]["state"], rows[0]["committed"], rows[0]["eta_s"]) == ("interrupted", 3, None)
    assert run["eta_s"] is None
    assert "ETA" not in _status_line(layout, capsys).replace("no ETA yet", "")


def test_status_and_the_report_count_stale_rows_alike(make_config, write_jsonl, monkeypatch):
    """A stale row is a finished row made for another prompt set (winners.sql); an aborted one is no result."""
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:Count to 3.")
    layout = stage(_config(make_config, write_jsonl), 2)
    monkeypatch.delenv("SHARDGEN_FAULT")
    old = part_rows(layout)
    assert sorted(r["finish_reason"] == "abort" for r in old) == [False] * 7 + [True]
    layout = _restage_keeping_done_files(_config(make_config, write_jsonl, temperature=0.1))
    run = eta.annotate(layout, status(layout))
    con = checkpoint.connect(layout)
    db.define_views(con, "winners")
    assert run["stale_rows"] == con.sql("SELECT count(*) FROM stale_rows").fetchall()[0][0] == 7
