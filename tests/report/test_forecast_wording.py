"""`shardgen forecast` says what it measured and what it assumed: a --log that is not there is an error even where a
storage plan could be printed (issue 38, item 7), a CPU run is forecast in CPU-engine words with its rate under
its own summary key, and the storage plan's default prefill GPU is labelled an assumed default (item 12)."""

import json

import pytest

from shardgen.cli import main
from shardgen.report.efficiency_forecast import forecast as run_forecast, markdown

from helpers import stage


@pytest.fixture
def cpu_run(make_config, write_jsonl):
    config = make_config([{"name": "a", "path": write_jsonl("a.jsonl", [{"query": f"Say {i}."} for i in range(8)]),
                           "format": "query_response"}])
    return config, stage(config, 2)


def test_a_missing_log_is_an_error_beside_a_storage_plan(cpu_run, tmp_path, caplog, capsys):
    config, layout = cpu_run
    path = str(config.write_resolved())
    assert main(["--config", path, "forecast"]) == 0
    assert "storage plan:" in capsys.readouterr().out  # the prompt set is built: a plan stands beside the forecast
    missing = tmp_path / "run.log"
    assert main(["--config", path, "forecast", "--log", str(missing)]) == 2
    assert f"--log {missing}: no such file" in caplog.text
    assert "storage plan:" not in capsys.readouterr().out


def test_a_cpu_runs_forecast_names_no_gpu(cpu_run, capsys):
    config, layout = cpu_run
    assert main(["--config", str(config.write_resolved()), "forecast"]) == 0
    time_forecast = capsys.readouterr().out.split("storage plan:")[0]  # the plan's prefill is a GPU job by nature
    assert "GPU" not in time_forecast and "every CPU engine busy until the end" in time_forecast

    report = run_forecast(config, layout, {"generated": 8, "dataset_generation_wall_s": 1.0})
    assert report["tok_per_s_per_gpu"] is None and report["tok_per_s_per_cpu_engine"] > 0
    text = markdown({"efficiency": [], "forecast": report})
    assert f"At {report['tok_per_s_per_cpu_engine']} output tok/s per CPU engine" in text
    assert "per GPU" not in text and "every GPU" not in text


def test_the_prefill_gpu_is_labelled_an_assumed_default_unless_named(cpu_run, capsys):
    config, _ = cpu_run
    path = str(config.write_resolved())
    assert main(["--config", path, "forecast", "--json"]) == 0
    prefill = json.loads(capsys.readouterr().out)["storage"]["prefill"]
    assert (prefill["gpu"], prefill["gpu_assumed"]) == ("NVIDIA H100 80GB HBM3", True)
    assert main(["--config", path, "forecast"]) == 0
    assert "GPU-hours on NVIDIA H100 80GB HBM3 (an assumed default: --gpu or hardware.gpu names yours)" in \
        capsys.readouterr().out
    assert main(["--config", path, "forecast", "--gpu", "NVIDIA H200"]) == 0
    out = capsys.readouterr().out
    assert "GPU-hours on NVIDIA H200 at" in out and "assumed default" not in out


def test_a_cpu_runs_rate_is_never_taken_for_a_gpus(cpu_run, capsys, caplog):
    # the Quick start's results, forecast for the production job without --log (issue 45, item 3)
    config, layout = cpu_run
    job = ["--prompts", "654676", "--output-tokens", "2599", "--gpus", "8"]
    overlay = layout.root.parent / "overlay.yaml"  # a few keys: no storage plan, the time forecast alone
    overlay.write_text(f"results_dir: {layout.root}\n")
    assert main(["--config", str(overlay), "forecast", *job]) == 2
    assert "was measured on a CPU engine" in caplog.text and "--log" in caplog.text
    assert "per GPU" not in capsys.readouterr().out
    # beside a storage plan (--pilot), the plan stands and the time forecast says why there is none
    assert main(["--config", str(config.write_resolved()), "forecast", "--pilot", str(layout.root), *job]) == 0
    time_forecast = capsys.readouterr().out.split("storage plan:")[0]
    assert time_forecast.startswith("no time forecast: the rate of ") and "CPU engine" in time_forecast
    assert "per GPU" not in time_forecast and " days)" not in time_forecast
    assert main(["--config", str(overlay), "forecast", *job, "--tok-per-s", "700"]) == 0  # a GPU rate given
    assert "at 700.00 output tok/s per GPU x 8" in capsys.readouterr().out
