"""The user-facing commands on a small generated results tree: status, query, reset."""

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.config import Config
from shardgen.generate.attempts import start_attempt
from shardgen.cli import main
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout, telemetry_path
from shardgen.generate.checkpoint import PartWriter
from shardgen.report.status import status

from helpers import part_rows, stage

# start_attempt takes typed engine settings (the schema's defaults here)
ENGINE = Config.from_dict({"model": {"path": "/m"},
                           "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]}).engine


def test_status_query_and_reset(make_config, write_jsonl, capsys):
    path = write_jsonl("a.jsonl", [{"query": f"Count to {i}."} for i in range(6)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout = stage(config, 2)
    results = str(layout.root)

    assert main(["--results", results, "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["shard", "prompts", "committed", "done", "state", "tokens_left", "commit_tok_per_s",
                                "eta_s", "out_tok_per_s", "running", "lost_parts", "silent_s"]
    assert [line.split()[:4] for line in lines[2:-1]] == [["0", "3", "3", "True"], ["1", "3", "3", "True"]]
    assert lines[-1].startswith("run: 100.0% of the output tokens committed") and "ETA 0 s" in lines[-1]

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
    assert "snakemake --configfile <the run's config file> -R" in capsys.readouterr().out
    assert not layout.done(1).exists() and not layout.shard_dir(1).exists()
    moved = list(layout.reset_dir.glob("shard-001-*/part-*.parquet"))
    assert moved and len(part_rows(layout)) < before  # moved aside, out of the committed set, not deleted
    stage(config, 2)
    assert len(part_rows(layout)) == before
    assert sum(pq.read_metadata(p).num_rows for p in moved) == 3


def test_status_shows_live_tokens_per_second_from_the_newest_telemetry(tmp_path, capsys):
    layout = Layout(tmp_path / "results")
    layout.split_dir.mkdir(parents=True)
    # status counts only rows of the current prompt set: the split holds the gen_keys of the rows committed below
    pq.write_table(pa.table({"prompt_id": [f"p{i}" for i in range(40)], "gen_key": [f"k{i}" for i in range(40)]}),
                   layout.split(0))
    shard_dir = layout.shard_dir(0)
    start_attempt(shard_dir, ENGINE)
    now = datetime.now(timezone.utc)
    entry = json.loads((shard_dir / "attempts.jsonl").read_text())  # started a minute before its telemetry
    entry["started_at"] = (now - timedelta(seconds=60)).isoformat()
    (shard_dir / "attempts.jsonl").write_text(json.dumps(entry) + "\n")
    rows = [{"prompt_id": f"p{i}", "gen_key": f"k{i}", "shard": 0, "attempt": 1, "completion": "x",
             "output_ids": [1] * 50, "finish_reason": "length", "prompt_tokens": 5, "completion_tokens": 50,
             "cached_tokens": 0, "latency_s": 1.0, "submitted_at": now, "finished_at": now, "gpu": "0", "error": None}
            for i in range(10)]
    PartWriter(shard_dir).commit(rows)
    assert status(layout)[0]["out_tok_per_s"] > 0  # no telemetry (the CPU engine): the attempt's average

    def decode(seconds_ago, running, tps):
        row = dict.fromkeys(tables.TELEMETRY.names)
        return {**row, "ts": now - timedelta(seconds=seconds_ago), "kind": "decode", "running": running, "queue": 3,
                "gen_throughput": tps}
    table = lambda rs: pa.Table.from_pylist(rs, schema=tables.TELEMETRY)  # noqa: E731
    pq.write_table(table([decode(30, 100, 1000.0)]), shard_dir / "telemetry-00000.parquet")
    pq.write_table(table([decode(8, 250, 5000.0), decode(2, 256, 6000.0)]), shard_dir / "telemetry-00001.parquet")
    assert main(["--results", str(layout.root), "status"]) == 0
    header, _, line, run = capsys.readouterr().out.splitlines()
    assert run == "run: no ETA yet (a rate needs two commits of one attempt)"
    shown = dict(zip(header.split(), line.split()))
    assert (shown["committed"], shown["out_tok_per_s"], shown["running"]) == ("10", "5500", "256")

    pq.write_table(table([decode(600, 256, 6000.0)]), shard_dir / "telemetry-00002.parquet")  # a stalled engine
    assert status(layout)[0]["running"] is None


def test_status_counts_the_parts_on_disk_and_names_lost_ones(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Add {i} and 1."} for i in range(12)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}], checkpoint={"every_records": 4})
    layout = stage(config, 1)
    shard_dir = layout.shard_dir(0)
    lost = sorted(shard_dir.glob("part-*.parquet"))[1]
    lost_rows = pq.read_metadata(lost).num_rows
    lost.unlink()
    damaged = sorted(shard_dir.glob("part-*.parquet"))[-1]
    damaged.write_bytes(damaged.read_bytes()[:40])  # truncated in place: same name, other size
    row = status(layout)[0]
    assert row["committed"] == 12 - lost_rows - 4  # what is on disk, not the done file's count
    assert row["lost_parts"] == f"{damaged.name} unreadable; {lost.name} missing ({lost_rows} rows)"

    damaged.unlink()
    record = generate_shard(config, 0, layout.done(0))  # what a plain rerun runs for this shard
    assert record["generated"] == 12
    assert status(layout)[0]["committed"] == 12 and status(layout)[0]["lost_parts"] is None
    index = [json.loads(line)["part"] for line in (shard_dir / "parts-index.jsonl").read_text().splitlines()]
    assert index == [p.name for p in sorted(shard_dir.glob("part-*.parquet"))]


def test_a_closed_pipe_is_quiet(make_config, write_jsonl):
    path = write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(6)])
    layout = stage(make_config([{"name": "a", "path": path, "format": "query_response"}]), 1)
    code = (f"import sys; from shardgen.cli import main; "
            f"sys.exit(main(['--results', {str(layout.root)!r}, 'query', 'dataset']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first write, as `| head` is after its lines
    err = proc.communicate(timeout=60)[1]
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141


def test_ctrl_c_during_generate_is_one_line(make_config, write_jsonl, monkeypatch, caplog, tmp_path):
    path = write_jsonl("a.jsonl", [{"query": f"Name {i}."} for i in range(6)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    layout = stage(config, 1)
    resolved = config.write_resolved()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("shardgen.generate.shard.generate_shard", interrupted)
    assert main(["--config", str(resolved), "generate", "--shard", "0", "--done", str(tmp_path / "d.json")]) == 130
    parts = len(list(layout.shard_dir(0).glob("part-*.parquet")))
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == \
        [f"shard 000 interrupted: {parts} parts kept, a rerun resumes"]


def test_status_says_a_shard_is_down_when_its_process_is_gone(tmp_path, capsys):
    import subprocess
    import sys
    import time

    from shardgen.layout import heartbeat_path

    layout = Layout(tmp_path / "results")
    layout.split_dir.mkdir(parents=True)
    pq.write_table(pa.table({"prompt_id": [f"p{i}" for i in range(4)]}), layout.split(0))
    shard_dir = layout.shard_dir(0)
    start_attempt(shard_dir, ENGINE)
    now = datetime.now(timezone.utc)
    row = dict.fromkeys(tables.TELEMETRY.names)
    decode = {**row, "ts": now, "kind": "decode", "running": 256, "gen_throughput": 7485.0}
    pq.write_table(pa.Table.from_pylist([decode], schema=tables.TELEMETRY), telemetry_path(shard_dir, 0))
    code = ("import sys, time; from pathlib import Path; from shardgen.generate import attempts\n"
            "with attempts.running(Path(sys.argv[1]), 1): time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(shard_dir)])
    try:
        deadline = time.time() + 30
        while not heartbeat_path(shard_dir).exists() and time.time() < deadline:
            time.sleep(0.1)
        live = status(layout)[0]
        assert (live["state"], live["running"]) == ("starting", 256)  # alive, its engine not started yet
    finally:
        child.kill()
        child.wait()  # SIGKILL, as SGLang's tree kill: the heartbeat file stays, its process is gone
    down = status(layout)[0]
    assert down["state"] == "down:killed"
    assert (down["running"], down["out_tok_per_s"], down["commit_tok_per_s"]) == (None, None, None)
    assert main(["--results", str(layout.root), "status"]) == 0
    assert "DOWN: shard 0 (killed, silent" in capsys.readouterr().out.splitlines()[-1]

    beat = json.loads(heartbeat_path(shard_dir).read_text())
    heartbeat_path(shard_dir).write_text(json.dumps({**beat, "host": "other-node", "at": time.time() - 31}))
    assert status(layout)[0]["state"] == "down:killed"  # another host: a stale heartbeat is all it takes


def _typo_config(tmp_path, results) -> str:
    path = tmp_path / "typo.yaml"
    path.write_text(f"results_dir: {results}\ndefaults:\n  tempreature: 0.5\n")
    return str(path)


def test_every_command_validates_the_config_it_is_given(tmp_path, caplog):
    from shardgen.config import Config, ConfigError

    typo = _typo_config(tmp_path, tmp_path / "results")
    try:
        Config.from_dict({"model": {"path": "m"}, "defaults": {"tempreature": 0.5},
                          "sources": [{"name": "a", "path": "a.jsonl", "format": "prompt"}]})
    except ConfigError as err:
        workflow_message = str(err)  # what a workflow run (common.smk's Config.from_dict) says
    for command in (["status"], ["query", "throughput"], ["reset", "0"], ["forecast"], ["diagnose"],
                    ["--results", str(tmp_path), "status"]):
        caplog.clear()
        assert main(["--config", typo, *command]) == 2, command
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [workflow_message], command
    assert "did you mean 'defaults.temperature'" in workflow_message
    caplog.clear()
    assert main(["--config", typo, "retry"]) == 2  # a step needs the whole config: the missing keys are named too
    assert "'model' is a required property" in caplog.text and "did you mean 'defaults.temperature'" in caplog.text


def test_an_overlay_with_a_few_keys_is_enough_for_the_read_only_commands(tmp_path, capsys, caplog):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"results_dir: {tmp_path / 'elsewhere'}\n")
    assert main(["--config", str(overlay), "status"]) == 2  # the overlay read: its folder holds no run
    assert f"no run in {tmp_path / 'elsewhere'}" in caplog.text and "config" not in caplog.text.split("no run")[0]


def test_a_results_folder_with_no_run_is_an_error_not_an_empty_table(tmp_path, capsys, caplog):
    typo = tmp_path / "runs" / "typo"
    for command in (["status"], ["query", "throughput"]):
        caplog.clear()
        assert main(["--results", str(typo), *command]) == 2
        assert f"no run in {typo}: no prompt set, split or generated parts there" in caplog.text
    assert "(no rows)" not in capsys.readouterr().out
    assert not typo.exists()  # looking created nothing


def _two_split_shards(tmp_path) -> tuple[Layout, str]:
    layout = Layout(tmp_path / "results")
    layout.split_dir.mkdir(parents=True)
    for shard in (0, 1):
        pq.write_table(pa.table({"prompt_id": ["p"]}), layout.split(shard))
    layout.shard_dir(1).mkdir(parents=True)
    config = tmp_path / "mine.yaml"
    config.write_text(f"results_dir: {layout.root}\n")
    return layout, str(config)


def test_reset_prints_a_rerun_with_the_config_and_refuses_a_shard_that_is_not_there(tmp_path, capsys, caplog):
    layout, config = _two_split_shards(tmp_path)
    assert main(["--config", config, "reset", "9"]) == 2
    assert f"no shard 9 in {layout.root}: this run has shards 0-1" in caplog.text
    assert main(["--config", config, "reset", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"now run: snakemake --configfile {config} -R {layout.done(1)}"


def test_retry_reads_the_workflow_config_when_none_is_given(make_config, write_jsonl, tmp_path, monkeypatch,
                                                            capsys, caplog):
    monkeypatch.delenv("SHARDGEN_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["retry"]) == 2  # no config anywhere: says where one comes from
    assert "--config FILE, $SHARDGEN_CONFIG (the workflow sets it for its steps), or config/config.yaml" in caplog.text

    path = write_jsonl("a.jsonl", [{"query": f"Spell {i}."} for i in range(4)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    stage(config, 1)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(config.write_resolved().read_text())
    assert main(["retry"]) == 0  # as the README writes it, from the workflow's folder
    assert json.loads(capsys.readouterr().out) == {"retried_shards": {}}


def test_an_engine_abort_fault_fails_requests_that_shardgen_retry_generates_again(make_config, write_jsonl,
                                                                                    monkeypatch, capsys):
    path = write_jsonl("a.jsonl", [{"query": f"Count the {'apples' if i % 2 else 'pears'} {i}."} for i in range(6)])
    config = make_config([{"name": "a", "path": path, "format": "query_response"}])
    monkeypatch.setenv("SHARDGEN_FAULT", "engine_abort:apples")  # the README's way to see a real retry
    layout = stage(config, 1)
    failed = pq.read_table(layout.shard_failed(0)).to_pylist()
    assert len(failed) == 3 and {f["error"] for f in failed} == {"simulated engine abort on 'apples' (SHARDGEN_FAULT)"}
    monkeypatch.delenv("SHARDGEN_FAULT")
    assert main(["--config", str(config.write_resolved()), "retry"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"retried_shards": {"0": {"generated": 6,
                                                                                             "failed": 0}}}


def test_diagnose_on_a_cpu_run_points_at_the_bundled_log_which_it_diagnoses(tmp_path, caplog, capsys):
    from conftest import REPO

    assert main(["--results", str(tmp_path / "results"), "diagnose"]) == 2  # the CPU demo: no SGLang telemetry
    example = "tests/data/sglang-logs/nh8b-no_buffer-default.log"
    assert "the CPU engine writes none" in caplog.text and f"`shardgen diagnose {example}`" in caplog.text
    assert f"`shardgen diagnose {example}`" in (REPO / "README.md").read_text()
    assert main(["--results", str(tmp_path / "results"), "diagnose", str(REPO / example)]) == 0
    assert "mamba_pool_bound" in capsys.readouterr().out
