"""`shardgen status` judges a run against its current config, not only against the last prompt set: a sampling
change made after a finished run, before anything reran, shows as stale work (issue 38, item 1)."""

from shardgen.cli import main

from helpers import stage


def _sources(write_jsonl) -> list[dict]:
    a = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(6)])
    b = write_jsonl("b.jsonl", [{"query": f"Spell the number {i}."} for i in range(6)])
    return [{"name": "a", "path": a, "format": "query_response"},
            {"name": "b", "path": b, "format": "query_response"}]


def _status(config, capsys) -> tuple[list[dict], list[str]]:
    assert main(["--config", str(config.write_resolved()), "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    rows = [dict(zip(header, line.split())) for line in lines[2:] if line.split()[:1] in (["0"], ["1"])]
    return rows, lines[len(rows) + 2:]


def test_a_sampling_change_not_yet_rerun_is_stale_work_not_done(make_config, write_jsonl, capsys):
    sources = _sources(write_jsonl)
    layout = stage(make_config(sources), 2)
    rows, tail = _status(make_config(sources), capsys)
    assert [(r["done"], r["state"]) for r in rows] == [("True", "done")] * 2  # the config it was made with
    assert "config_changed" not in rows[0] and tail[0].startswith("run: 100.0% of the output tokens committed")

    changed = make_config([{**sources[0], "sampling": {"temperature": 0.9}}, sources[1]])
    rows, tail = _status(changed, capsys)
    assert [(r["done"], r["state"], r["tokens_left"]) for r in rows] == [("False", "stale", "-")] * 2
    # source a's 6 prompts get other gen_keys under the new config; the split spread them over both shards
    assert sum(int(r["config_changed"]) for r in rows) == 6 and all(int(r["config_changed"]) > 0 for r in rows)
    assert "ETA 0 s" not in tail[0] and "100.0%" not in tail[0]
    assert tail[1].startswith("config: 6 prompts of the prompt set now have other settings or no source (shard 0: ")
    assert "a run of the workflow rebuilds the prompt set" in tail[1]
    assert layout.done(0).exists() and layout.done(1).exists()  # status only reads


def test_a_source_added_to_the_config_is_work_the_prompt_set_lacks(make_config, write_jsonl, capsys):
    sources = _sources(write_jsonl)
    stage(make_config(sources[:1]), 2)
    rows, tail = _status(make_config(sources), capsys)
    assert [r["state"] for r in rows] == ["stale"] * 2
    assert tail[1].startswith("config: the prompt set lacks source(s) b;")


def test_a_config_of_another_results_folder_is_not_judged(make_config, write_jsonl, capsys, tmp_path):
    sources = _sources(write_jsonl)
    layout = stage(make_config(sources), 2)
    elsewhere = make_config([{**sources[0], "sampling": {"temperature": 0.9}}, sources[1]],
                            results_dir=str(tmp_path / "other"))
    assert main(["--config", str(elsewhere.write_resolved()), "--results", str(layout.root), "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[4] for line in lines[2:4]] == ["done", "done"] and not lines[-1].startswith("config:")


def test_a_config_whose_model_is_not_here_leaves_status_reading_the_results(make_config, write_jsonl, capsys,
                                                                            tmp_path):
    # status on a login node: the config names a model folder this machine does not have
    sources = _sources(write_jsonl)
    stage(make_config(sources), 2)
    elsewhere = make_config(sources, model={"path": str(tmp_path / "no-model")})
    rows, tail = _status(elsewhere, capsys)
    assert [r["state"] for r in rows] == ["done", "done"]
    assert tail[-1].startswith("config: not judged against the prompt set (") and "no-model" in tail[-1]


def test_a_changed_source_limit_is_work_before_the_rerun(make_config, write_jsonl, capsys):
    sources = _sources(write_jsonl)  # 6 rows each
    stage(make_config([{**sources[0], "limit": 3}, {**sources[1], "limit": 10}]), 2)
    rows, tail = _status(make_config([{**sources[0], "limit": 3}, {**sources[1], "limit": 10}]), capsys)
    assert [r["state"] for r in rows] == ["done"] * 2  # as built
    rows, tail = _status(make_config([{**sources[0], "limit": 3}, {**sources[1], "limit": 20}]), capsys)
    assert [r["state"] for r in rows] == ["done"] * 2  # b ran out at 6 rows: a larger limit reads the same
    rows, tail = _status(make_config([{**sources[0], "limit": 5}, {**sources[1], "limit": 4}]), capsys)
    assert [r["state"] for r in rows] == ["stale"] * 2 and "100.0%" not in tail[0]  # a reads more, b fewer
    assert tail[1].startswith("config: source(s) a, b now read other rows (their `limit` changed);")
