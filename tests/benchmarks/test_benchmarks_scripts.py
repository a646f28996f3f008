"""Every benchmark script imports against today's package (a renamed function fails here, not on a GPU host), and
the scripts with a CPU path run it: the shard-balance replay and the running-requests figure on a committed H200
run, `shardgen status` timed on a few parts, variable_length's workload builder, hidden-state capture's arms and
the status ETA's accuracy on a short CPU run."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from shardgen.config import Config

BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*/*.py"))  # one folder per thing measured: engine/, capture/, workflow/, cpu/
SESSIONS = sorted((BENCHMARKS / "sessions").glob("*.sh"))
RUN = BENCHMARKS / "results" / "2026-12-03-h200-variable-length.json"


def bench(*args, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=True)


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{s.parent.name}/{s.stem}" for s in SCRIPTS])
def test_every_benchmark_script_imports(script, monkeypatch):
    monkeypatch.syspath_prepend(str(script.parent))  # as when run: a script imports its siblings (bench_data)
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the __main__ guard keeps main() from running
    # a script's entry point is main(); bench_data is the siblings' library (their workload writer)
    assert callable(getattr(module, "write_source" if script.stem == "bench_data" else "main", None)), script.name


@pytest.mark.parametrize("session", SESSIONS, ids=[s.stem for s in SESSIONS])
def test_every_gpu_session_parses_shares_the_driver_and_names_scripts_that_exist(session):
    """A session runs on the GPU machine from the repo root (`bash benchmarks/sessions/NAME.sh STEP`): it parses, the
    one driver sets its machine up, and every benchmark it runs is where it names it."""
    subprocess.run(["bash", "-n", str(session)], check=True)
    text = session.read_text()
    if session.name != "driver.sh":  # the driver is sourced, never run; each session says how it is run
        assert "source benchmarks/sessions/driver.sh" in text and f"bash benchmarks/sessions/{session.name}" in text
    named = set(re.findall(r"benchmarks/[a-z0-9_/]+\.(?:py|sh)", text))
    assert named and sorted(name for name in named if not (REPO / name).is_file()) == []


def test_shard_balance_replays_the_committed_run(tmp_path):
    out = tmp_path / "balance.json"
    bench(BENCHMARKS / "workflow" / "shard_balance.py", "--run", RUN, "--out", out)
    result = json.loads(out.read_text())
    assert result["as_run"]["requests"] == 2690 and result["resampled_x8"]["requests"] == 8 * 2690
    assert len(result["as_run"]["finish_s"]) == 8 and result["as_run"]["slowest_over_mean"] >= 1.0


def test_plot_running_draws_the_committed_run(tmp_path):
    run = shutil.copy(RUN, tmp_path / RUN.name)
    bench(BENCHMARKS / "engine" / "plot_running.py", run)
    assert (tmp_path / (RUN.stem + "-running.png")).stat().st_size > 0


def test_status_benchmark_on_a_few_parts(tmp_path):
    out = tmp_path / "status.json"
    proc = bench(BENCHMARKS / "workflow" / "status.py", "--shards", 2, "--parts", 3, "--repeats", 2, "--save", out)
    result = json.loads(out.read_text())
    assert json.loads(proc.stdout.splitlines()[-1]) == result  # what it prints is what it saves
    assert {k: result[k] for k in ("shards", "parts_per_shard", "rows_per_part", "goal_s")} == {
        "shards": 2, "parts_per_shard": 3, "rows_per_part": 10, "goal_s": 1.0}
    assert 0 < result["min_s"] <= result["median_s"] <= result["max_s"] and result["cold_s"] > 0
    assert set(result) == {"shards", "parts_per_shard", "rows_per_part", "cold_s", "median_s", "min_s", "max_s",
                           "goal_s", "machine", "date"}


def test_variable_length_make_writes_a_valid_config(tmp_path, demo_model):
    bench(BENCHMARKS / "engine" / "variable_length.py", "make", "--out", tmp_path / "w", "--model", demo_model,
          "--scale", 0.01)
    raw = yaml.safe_load((tmp_path / "w" / "config.yaml").read_text())
    config = Config.from_dict(raw)
    assert len(config.sources) == 4 and all(Path(s.path).is_file() for s in config.sources)


def test_hidden_states_cpu_runs_its_arms_and_matches_its_forecast(tmp_path):
    """benchmarks/capture/hidden_states_cpu.py on 2 rows: every arm, the same tokens in each, bytes within 5% of
    forecast."""
    out = tmp_path / "hidden.json"
    bench(BENCHMARKS / "capture" / "hidden_states_cpu.py", "--workdir", tmp_path / "work", "--rows", "2", "--save", out)
    arms = {a["arm"]: a for a in json.loads(out.read_text())["arms"]}
    assert list(arms) == ["off", "bfloat16", "float8_e4m3fn"]
    assert len({a["output_tokens"] for a in arms.values()}) == 1 and all(len(a["wall_s"]) == 2 for a in arms.values())
    assert all(0.95 <= arms[name]["measured_over_forecast"] <= 1.05 for name in ("bfloat16", "float8_e4m3fn"))


def test_eta_accuracy_cpu_run_reports_each_mark_against_the_duration(tmp_path):
    """benchmarks/workflow/eta_accuracy.py --cpu on 48 prompts (6 parts): the shard generated, the ETA read at 10%
    of the output tokens while most of the run was still to come, each mark's error computed from its prediction.
    Its accuracy is the benchmark's figure, not asserted here (wall time on a shared machine)."""
    out = tmp_path / "eta.json"
    bench(BENCHMARKS / "workflow" / "eta_accuracy.py", "--cpu", tmp_path / "work", "--prompts", "48", "--poll", "0.2",
          "--save", out)
    result = json.loads(out.read_text())
    assert (result["engine"], result["prompts"]) == ("transformers", 48) and result["output_tokens"] > 0
    first = result["marks"]["10%"]
    assert 0.1 <= first["committed_share"] < 0.5 and 0 < first["at_s"] < result["duration_s"]
    for mark in filter(None, result["marks"].values()):
        assert mark["error_of_duration"] == pytest.approx((mark["predicted_s"] - result["duration_s"])
                                                          / result["duration_s"], abs=0.01)
