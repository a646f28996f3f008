"""tune/report.py and tune/measure.py on their own: the ranking, the summary over hand-written results (a numerics
change ranked but not recommended), the config fragment, the sample, and a measurement whose process dies."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from shardgen.layout import TuneLayout
from shardgen.tune import measure, report


def result(name, status="ok", steady=None, output=None, **more) -> dict:
    return {"setting": name, "status": status, "steady_decode_tps": steady, "output_tps": output, **more}


def test_ranking_steady_decode_first_then_whole_run_unsaturated_after_failed_last():
    ranked = report.rank([result("failed", "failed"), result("unsat", output=900.0), result("b", steady=100.0,
                          output=50.0), result("a", steady=100.0, output=60.0), result("c", steady=200.0)])
    assert [r["setting"] for r in ranked] == ["c", "a", "b", "unsat", "failed"]


def plan(tmp_path) -> dict:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"mamba_ssm_dtype": "float32"}))
    sglang = {"backend": "sglang", "memory_share": 0.88, "max_running_requests": 512,
              "sglang": {"mamba_strategy": "no_radix"}, "args": {}}
    return {"config": {"model": {"path": str(tmp_path / "model")},
                       "engine": {"args": {"mamba_full_memory_ratio": 8.0}}},
            "settings": {"current": {**sglang, "sglang": {"mamba_strategy": "extra_buffer"},
                                     "max_running_requests": None},
                         "fast_bf16": {**sglang, "args": {"mamba_ssm_dtype": "bfloat16"}},
                         "good": sglang, "never_ran": sglang},
            "sample_rows": 40, "max_new_tokens": 8, "ignore_eos": True}


def write_results(tune_dir, *results):
    for r in results:
        path = TuneLayout(tune_dir).result(r["setting"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_a_numerics_change_is_ranked_but_the_best_is_the_fastest_that_keeps_the_numbers(tmp_path):
    p, tune_dir = plan(tmp_path), tmp_path / "tune"
    engine = {"resolved": {"mamba_full_memory_ratio": 0.9}}
    write_results(tune_dir, result("current", steady=100.0, output=80.0, engine=engine),
                  result("fast_bf16", steady=300.0, output=250.0, engine=engine),
                  result("good", steady=200.0, output=120.0, running_max=512, engine=engine))
    summary = report.summarize(tune_dir, p)
    assert [r["setting"] for r in summary["ranking"]] == ["fast_bf16", "good", "current"]
    assert summary["ranking"][0]["numerics_change"] and summary["ranking"][1]["numerics_change"] is None
    assert (summary["best"], summary["measured"], summary["settings"], summary["pending"]) == ("good", 3, 4,
                                                                                               ["never_ran"])
    assert summary["best_over_current"] == {"steady_decode_tps": 2.0, "output_tps": 1.5}
    assert report.summarize(tune_dir, p, allow_numerics_change=True)["best"] == "fast_bf16"

    text = report.fragment(p, json.loads(TuneLayout(tune_dir).result("good").read_text()) | {"numerics_change": None},
                           summary)
    assert "best of 3 of 4 settings, on 40 sampled prompts: `good`" in text and "x2.0" in text
    # the user's memory-layout arg the winner did not set is written as the winner ran it (config files merge)
    assert yaml.safe_load(text) == {"engine": {"memory_share": 0.88, "max_running_requests": 512,
                                               "sglang": {"mamba_strategy": "no_radix"},
                                               "args": {"mamba_full_memory_ratio": 0.9}}}


def test_the_sample_takes_the_plans_max_new_tokens(tmp_path):
    tune = TuneLayout(tmp_path)
    pq.write_table(pa.table({"gen_key": ["a", "b"], "max_new_tokens": [100, 200]}), tune.sample)
    assert [r["max_new_tokens"] for r in measure.load_sample(tmp_path, {"max_new_tokens": 8})] == [8, 8]
    assert [r["max_new_tokens"] for r in measure.load_sample(tmp_path, {"max_new_tokens": None})] == [100, 200]


def test_a_measurement_whose_process_dies_is_recorded_as_failed_with_its_log_tail(tmp_path):
    tune = TuneLayout(tmp_path)
    stale = tune.setting_dir("x") / "stale-telemetry"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an interrupted measurement")
    got = measure.run_setting(tmp_path, "x")  # no plan.json: the child fails at once
    assert got["status"] == "failed" and got["returncode"] != 0 and not stale.exists()
    assert any("plan.json" in line for line in got["log_tail"])
    assert json.loads(tune.result("x").read_text()) == got
