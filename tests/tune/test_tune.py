"""`shardgen tune` over tests/fake_sglang: a decode throughput that depends on the settings, and one setting that
runs out of memory at start-up (no GPU ran: the figures are the fake's)."""

import json
import os

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.prompts.stage import build_prompts
from shardgen.tune.plan import grid

import preloaded
from helpers import FAKE

# The real tune calls take ~55 s together on 2 cores and the module is collected last: handed out first, they are
# not the suite's last minute on one worker while the others idle.
pytestmark = pytest.mark.slow


def engine(**overrides) -> dict:
    raw = {"model": {"path": "/m"}, "engine": {"backend": "sglang", **overrides},
           "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]}
    return Config.from_dict(raw).engine.as_dict()


def test_grid_starts_from_the_current_settings_and_drops_their_memory_layout_args():
    current = engine(sglang={"mamba_strategy": "extra_buffer"},
                     args={"mamba_full_memory_ratio": 8.0, "cuda_graph_max_bs": 256, "attention_backend": "fa3"})
    settings = grid(current, [256, 512], bf16_state=True)
    assert list(settings) == ["current", "no_buffer", "extra_buffer", "no_buffer_ratio8_graphs512", "no_radix_256",
                              "no_radix_512", "no_radix_512_bf16"]
    assert settings["current"] == current
    assert settings["extra_buffer"]["args"] == {"attention_backend": "fa3"}  # SGLang's default ratio and graphs
    assert settings["no_radix_512"]["max_running_requests"] == 512
    assert settings["no_radix_512_bf16"]["args"]["mamba_ssm_dtype"] == "bfloat16"
    assert settings["no_buffer_ratio8_graphs512"]["args"] == {
        "attention_backend": "fa3", "mamba_full_memory_ratio": 8.0, "cuda_graph_max_bs": 512}


def test_a_variant_equal_to_the_current_settings_is_not_measured_twice():
    settings = grid(engine(sglang={"mamba_strategy": "no_buffer"}), [512], bf16_state=False)  # SGLang's cap
    assert list(settings) == ["current", "extra_buffer", "no_buffer_ratio8_graphs512", "no_radix_512"]


@pytest.fixture
def tune_env(make_config, write_jsonl, tmp_path):
    rows = [{"query": f"Question {i}: " + "why " * i} for i in range(48)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                      engine={"backend": "sglang", "sglang": {"mamba_strategy": "extra_buffer"},
                              "args": {"mamba_full_memory_ratio": 8.0}}, gpus=1)
    build_prompts(cfg, Layout(cfg.results).prompts_dir)
    env = {**os.environ, "PYTHONPATH": f"{FAKE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "FAKE_SGLANG_VERSION": "0.5.17", "FAKE_SGLANG_TPS_BY_SETTING": "1", "FAKE_SGLANG_START_OOM_ABOVE": "16",
           "FAKE_SGLANG_LATENCY": "0.3", "SHARDGEN_GPU_LOCK_DIR": str(tmp_path / "locks")}
    env.pop("CUDA_VISIBLE_DEVICES", None)

    def tune(*args):
        return preloaded.run(["--config", str(cfg.write_resolved()), "tune", "--sample", "40", "--caps", "8,24",
                              "--max-new-tokens", "8", "--ignore-eos", *args], env)

    return tune, Layout(cfg.results).root / "tune"


def test_tune_measures_one_setting_per_call_then_ranks_and_writes_the_best(tune_env):
    tune, tune_dir = tune_env
    first = tune()
    assert first.returncode == 0, first.stderr[-3000:]
    assert "1 of 7 settings measured; run the same command again" in first.stdout
    assert "best so far: current (x1.0 steady decode, x1.0 whole run over the current settings)" in first.stdout
    assert json.loads((tune_dir / "current" / "result.json").read_text())["status"] == "ok"

    rest = tune("--count", "0")
    assert rest.returncode == 0, rest.stderr[-3000:]
    summary = json.loads((tune_dir / "tune.json").read_text())
    assert summary["pending"] == [] and summary["sample_rows"] == 40
    ranking = {r["setting"]: r for r in summary["ranking"]}
    assert [r["setting"] for r in summary["ranking"]][0] == summary["best"] == "no_radix_8"
    assert ranking["no_radix_8"]["steady_decode_tps"] == 240.0 and ranking["current"]["steady_decode_tps"] == 80.0
    assert ranking["no_buffer"]["steady_decode_tps"] == 160.0 and ranking["no_buffer"]["running_max"] == 16
    assert ranking["no_radix_8"]["running_max"] == 8 and ranking["no_radix_8"]["output_tps"] > 0
    assert summary["best_over_current"]["steady_decode_tps"] == 3.0  # the demo config caps at 8
    for name in ("no_radix_24", "no_radix_24_bf16"):  # out of memory at start-up: recorded, ranked last
        assert ranking[name]["status"] == "failed"
        assert "out of memory" in " ".join(json.loads((tune_dir / name / "result.json").read_text())["log_tail"])
    assert [r["status"] for r in summary["ranking"]][-2:] == ["failed", "failed"]

    sample = pq.read_table(tune_dir / "sample.parquet")
    assert sample.num_rows == len(set(sample["prompt_id"].to_pylist())) == 40
    for name in ("current", "no_radix_8"):  # every setting ran the whole sample once
        parts = f"{tune_dir / name}/parts/part-*.parquet"
        assert duckdb.sql(f"SELECT count(DISTINCT prompt_id) FROM '{parts}'").fetchall()[0][0] == 40

    best = yaml.safe_load((tune_dir / "best.yaml").read_text())["engine"]
    assert (best["sglang"]["mamba_strategy"], best["max_running_requests"]) == ("no_radix", 8)
    # the user's ratio would survive Snakemake's key-by-key merge: the fragment sets what the winner ran with
    assert best["args"]["mamba_full_memory_ratio"] == 0.9
    assert "steady decode x3.0" in (tune_dir / "best.yaml").read_text()


def test_a_later_call_with_other_sample_settings_is_refused(tune_env):
    tune, _ = tune_env
    assert tune("--settings", "no_radix_8").returncode == 0
    other = tune("--settings", "no_radix_8", "--max-new-tokens", "9")
    assert other.returncode == 2 and "different max_new_tokens" in other.stderr
    unknown = tune("--settings", "no_radix_9")
    assert unknown.returncode == 2 and "unknown ['no_radix_9']" in unknown.stderr


def test_a_setting_that_changes_the_numerics_is_ranked_but_recommended_only_when_allowed(tune_env):
    tune, tune_dir = tune_env
    # the fake decodes 1.5x faster with a bfloat16 SSM state; the demo model's config keeps SGLang's float32
    measured = tune("--caps", "8", "--settings", "no_radix_8,no_radix_8_bf16", "--count", "0")
    assert measured.returncode == 0, measured.stderr[-3000:]
    summary = json.loads((tune_dir / "tune.json").read_text())
    ranking = {r["setting"]: r for r in summary["ranking"]}
    assert [r["setting"] for r in summary["ranking"]] == ["no_radix_8_bf16", "no_radix_8"]  # by steady decode
    assert ranking["no_radix_8_bf16"]["steady_decode_tps"] == 360.0
    assert ranking["no_radix_8_bf16"]["numerics_change"] == \
        "mamba_ssm_dtype bfloat16 (the model's SSM state is float32)"
    assert ranking["no_radix_8"]["numerics_change"] is None
    assert summary["best"] == "no_radix_8" and summary["allow_numerics_change"] is False
    assert "numerics_change" in (tune_dir / "ranking.md").read_text()
    best = yaml.safe_load((tune_dir / "best.yaml").read_text())["engine"]
    assert "mamba_ssm_dtype" not in best["args"] and best["max_running_requests"] == 8

    allowed = tune("--caps", "8", "--settings", "no_radix_8,no_radix_8_bf16", "--allow-numerics-change")  # ranks again
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert json.loads((tune_dir / "tune.json").read_text())["best"] == "no_radix_8_bf16"
    fragment = (tune_dir / "best.yaml").read_text()
    assert yaml.safe_load(fragment)["engine"]["args"]["mamba_ssm_dtype"] == "bfloat16"
    assert "# changes the model's numerics (allowed by --allow-numerics-change): mamba_ssm_dtype bfloat16" in fragment
