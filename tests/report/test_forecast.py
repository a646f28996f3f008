"""`shardgen forecast` against the seed's case, by hand: 654,676 prompts x 2,599 output tokens = 1,701,502,924
tokens; at one decode line's 671.84 tok/s per GPU on 8 GPUs that is 1,701,502,924 / 5,374.72 = 316,575 s = 87.9 h;
at the observed 1.7 requests/s for the whole run, 654,676 / 1.7 = 385,104 s = 107.0 h."""

import json

import pytest

from shardgen.cli import main
from shardgen.report.forecast import ForecastError, forecast

SEED_LINE = ("[2026-11-20 09:00:00] Decode batch, #running-req: 32, #token: 83162, token usage: 0.04, "
             "cuda graph: True, gen throughput (token/s): 671.84, #queue-req: 0")


def test_the_seeds_case_from_its_log_line(tmp_path, capsys):
    log = tmp_path / "seed.log"
    log.write_text(SEED_LINE + "\n")
    assert main(["forecast", "--prompts", "654676", "--output-tokens", "2599", "--gpus", "8", "--log", str(log),
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["hours"] == 87.9 and result["output_tokens"] == 1_701_502_924
    assert "32 running with an empty queue: 671.84 tok/s" in result["measured"]
    assert "output length" in result["assumption"]
    assert forecast(654_676, 2599, 8, req_per_s=1.7)["hours"] == 107.0


def test_forecast_needs_a_rate_and_sizes(tmp_path):
    with pytest.raises(ForecastError, match="positive"):
        forecast(0, 100, 8, tok_per_s_per_gpu=10)
    assert main(["--results", str(tmp_path), "forecast", "--prompts", "10", "--output-tokens", "5",
                 "--gpus", "1"]) == 2  # no run, no rate given: a clear error, not a crash


def test_forecast_from_a_runs_own_rate(make_config, write_jsonl, capsys):
    from helpers import stage

    config = make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(6)]),
                           "format": "query_response"}])
    stage(config, 1)
    assert main(["--config", str(config.write_resolved()), "forecast", "--prompts", "1000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["output_tokens_per_prompt"] > 0 and result["seconds"] > 0
    assert "this run: 1 shard" in result["measured"] and (result["gpus"], result["device"]) == (2, "cpu")


def test_a_missing_log_is_a_clear_error(tmp_path, caplog):
    missing = tmp_path / "run.log"
    assert main(["--results", str(tmp_path), "forecast", "--prompts", "10", "--output-tokens", "5", "--gpus", "1",
                 "--log", str(missing)]) == 2
    assert f"--log {missing}: no such file" in caplog.text


def test_a_cpu_runs_forecast_counts_its_side_by_side_engines_and_says_cpu(make_config, write_jsonl):
    from helpers import stage
    from shardgen.report.efficiency_forecast import forecast as run_forecast, markdown

    config = make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(8)]),
                           "format": "query_response"}])
    assert config.gpus == 0 and config.n_shards == 2  # the demo's
    f = run_forecast(config, stage(config, 2), {"generated": 8, "dataset_generation_wall_s": 1.0})
    assert (f["gpus"], f["device"]) == (2, "cpu")  # both shards' engines ran at once, not "1 GPU(s)"
    text = markdown({"efficiency": [], "forecast": f})
    assert "on 2 CPU engine(s)" in text and "GPU(s)" not in text and "says nothing about a GPU run" in text


def test_the_command_forecasts_a_cpu_run_as_its_report_does(make_config, write_jsonl, capsys):
    from helpers import stage
    from shardgen.report.efficiency_forecast import forecast as run_forecast

    config = make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(8)]),
                           "format": "query_response"}])
    report = run_forecast(config, stage(config, 2), {"generated": 8, "dataset_generation_wall_s": 1.0})
    path = str(config.write_resolved())
    assert main(["--config", path, "forecast", "--json"]) == 0
    command = json.loads(capsys.readouterr().out)
    assert (command["gpus"], command["device"], command["seconds"]) == (2, "cpu", report["this_run_forecast_s"])
    assert main(["--config", path, "forecast"]) == 0
    text = capsys.readouterr().out
    assert "on 2 CPU engine(s)" in text and "GPU" not in text.split("\nassumption")[0]
