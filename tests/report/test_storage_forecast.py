"""The storage plan (`shardgen forecast`'s and the report's) against a real demo run's files: the whole demo (five
sources, one regenerated turn by turn) forecast from a pilot run of its first 12 prompts per source, and the plan
before anything ran (max_new_tokens, the formats), checked by hand."""

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from shardgen.cli import main
from shardgen.engines.model_shape import ModelShape
from shardgen.layout import Layout
from shardgen.report import storage_plan, storage_sizes

REPO = Path(__file__).resolve().parents[2]


def pilot_run(model: Path, out: Path, limit: int) -> Layout:
    """The demo config's first `limit` rows per source on its CPU engine, merged as `shardgen merge` does."""
    from helpers import stage
    from shardgen.config import Config
    from shardgen.merge.stage import run

    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(out / "results"))
    raw["model"]["path"] = str(model)
    for source in raw["sources"]:
        for key in ("path", "dataset"):
            if key in source:
                source[key] = str(REPO / source[key])
        source["limit"] = limit
    config = Config.from_dict(raw)
    layout = stage(config, 2)
    run(config, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    return layout


@pytest.fixture(scope="module")
def runs(finished_demo, demo_model, tmp_path_factory):
    """(the whole demo as `snakemake` ran it, read only; the pilot). The workflow builds its demo model with the
    same seeded build as the demo_model fixture: the same tokenizer and weights."""
    whole = Layout(finished_demo / "results")
    for name in ("tokenizer.json", "model.safetensors"):
        assert (whole.root / "demo-model" / name).read_bytes() == (demo_model / name).read_bytes(), name
    return whole, pilot_run(demo_model, tmp_path_factory.mktemp("pilot"), 12)


def real_sizes(layout: Layout) -> dict[str, int]:
    return {name: path.stat().st_size for name, path in storage_sizes.files(layout).items()}


def test_the_whole_demo_forecast_from_a_pilot_is_within_10_percent_of_its_files(runs, demo_model):
    whole, pilot = runs
    result = storage_plan.plan(whole, demo_model, pilot=pilot.root)
    real, forecast = real_sizes(whole), {f["file"]: f["bytes"] for f in result["files"]}
    assert result["plan"]["sizes_from"] == "the pilot run's files" and result["plan"]["pilot"] == str(pilot.root)
    assert abs(result["dataset_and_exports_bytes"] / sum(real.values()) - 1) <= 0.10, (forecast, real)
    for name in ("turns.jsonl", "tokens.jsonl"):  # the token exports, the bulk of a run's disk
        assert abs(forecast[name] / real[name] - 1) <= 0.10, (name, forecast[name], real[name])
    for name in ("data.parquet", "turns.parquet", "tokens.parquet"):
        # zstd compresses a bigger file a little better than the small pilot's: the forecast errs high, not low
        assert 1.0 <= forecast[name] / real[name] <= 1.15, (name, forecast[name], real[name])
    tokens = sum(r["prompt_tokens"] + r["completion_tokens"]
                 for r in pq.read_table(whole.dataset, columns=["prompt_tokens", "completion_tokens"]).to_pylist())
    assert abs(result["plan"]["tokens"] / tokens - 1) <= 0.02  # later turns' prompts calibrated on the pilot's
    assert result["plan"]["turns"] == pq.read_metadata(whole.dataset).num_rows


def test_a_merged_run_plans_its_own_files_exactly(runs, demo_model):
    whole, _ = runs
    result = storage_plan.plan(whole, demo_model)
    assert {f["file"]: f["bytes"] for f in result["files"]} == real_sizes(whole)


def test_before_any_run_the_plan_is_max_new_tokens_and_the_formats_by_hand(runs, demo_model, tmp_path):
    whole, _ = runs
    fresh = Layout(tmp_path / "results")
    fresh.prompts_dir.mkdir(parents=True)
    shutil.copy(whole.prompts, fresh.prompts)  # `shardgen prompts` ran, nothing else
    prompts = pq.read_table(fresh.prompts).to_pylist()
    result = storage_plan.plan(fresh, demo_model, topk=64, dflash_layers=3)
    plan = result["plan"]
    assert plan["pilot"] is None and plan["sizes_from"] == "the formats (no pilot run)"
    assert {s["output_length_from"] for s in plan["per_source"].values()} == {
        "max_new_tokens (nothing ran yet: an upper bound)"}
    turns = [max(len(p["turns"] or []), 1) for p in prompts]
    assert plan["turns"] == sum(turns) and plan["tokens"] == sum(p["work_tokens"] for p in prompts)
    assert plan["output_tokens"] == sum(n * p["max_new_tokens"] for n, p in zip(turns, prompts))
    assert result["topk_sidecar"]["bytes"] == plan["output_tokens"] * (2 + 64 * (4 + 2))
    one = prompts[0]["source"]  # a sidecar of one source's turns (its `capture: true`) holds only their tokens
    side = storage_plan.plan(fresh, demo_model, topk=20, captured=frozenset({one}))["topk_sidecar"]
    tokens = sum(n * p["max_new_tokens"] for n, p in zip(turns, prompts) if p["source"] == one)
    assert (side["sources"], side["output_tokens"], side["bytes"]) == ([one], tokens, tokens * (2 + 20 * 6))
    assert 0 < tokens < plan["output_tokens"]
    hidden = ModelShape.from_dir(demo_model).get("hidden_size")
    eagle, dflash = result["hidden_states"]
    assert (eagle["bf16_bytes"], eagle["fp8_bytes"]) == (4 * hidden * 2 * plan["tokens"], 4 * hidden * plan["tokens"])
    assert dflash["bf16_bytes"] == 3 * hidden * 2 * plan["tokens"]
    prefill = result["prefill"]
    assert prefill["gpu_hours"] == pytest.approx(2 * ModelShape.from_dir(demo_model).weights()[0] * plan["tokens"]
                                                 / (989.5e12 * 0.4) / 3600)
    assert result["dataset_and_exports_bytes"] > 0


def test_the_command_prints_the_plan_and_refuses_a_bad_k(runs, demo_model, capsys):
    whole, _ = runs
    args = ["--results", str(whole.root), "forecast", "--model", str(demo_model), "--gpus", "1"]
    assert main([*args, "--topk", "64", "--gpu", "NVIDIA H200"]) == 0
    text = capsys.readouterr().out
    assert "top-k sidecar at k = 64: 386 B per generated token" in text and "on NVIDIA H200 at 40%" in text
    assert "dataset + exports" in text and "EAGLE-3" in text and "DFlash" in text
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["storage"]["dataset_and_exports_bytes"] == sum(real_sizes(whole).values())
    assert main([*args, "--topk", "-1"]) == 2
