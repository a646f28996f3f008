"""The storage plan sizes the hidden states a run captures (config capture.hidden_states), every byte: before the
run, bytes per position (layers x hidden size x dtype, + fp8's scale) times the captured positions, within 5% of
what the run's parts then hold on the CPU demo, and each trainer's export as its cost when made, within 5% of what
`shardgen export-hidden` writes; once it has run, from its own files (the parts index's hidden_bytes, each export
made under exports/hidden/), in `shardgen forecast`'s plan and the report's."""

import json

import pytest

from shardgen.layout import Layout
from shardgen.merge.hidden_exports import export
from shardgen.merge.stage import run as merge_step
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts
from shardgen.report import storage_plan

from helpers import stage

GREEDY = {"temperature": 0.0, "max_new_tokens": 12}


def config(make_config, write_jsonl, tmp_path, name: str, dtype: str):
    rows = [{"query": f"Tell me about the number {i} and its friends."} for i in range(6)]
    return make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                         "sampling": GREEDY}], shards=1, results_dir=str(tmp_path / name),
                       capture={"hidden_states": {"enabled": True, "dtype": dtype}})


def merged(cfg) -> Layout:
    layout = stage(cfg, 1)
    merge_step(cfg, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    return layout


def folder_bytes(path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_the_forecast_before_a_run_is_within_5_percent_of_what_it_writes(make_config, write_jsonl, tmp_path,
                                                                        demo_model, dtype):
    from shardgen.capture import HiddenCapture, named_layers

    pilot = merged(config(make_config, write_jsonl, tmp_path, "pilot", dtype))
    cfg = config(make_config, write_jsonl, tmp_path, "run", dtype)
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    before = storage_plan.plan(layout, demo_model, pilot=pilot.root, hidden_capture=HiddenCapture.of(cfg))
    planned = before["hidden_capture"]
    model = json.loads((demo_model / "config.json").read_text())
    # eagle3: [2, L//2, L-3] once each, L and last_before_norm (the demo's 4 layers: [1, 2, 4, last_before_norm])
    values = len(named_layers("eagle3", model["num_hidden_layers"])) * model["hidden_size"]
    assert planned["bytes_per_token"] == (values * 2 if dtype == "bfloat16" else values + 4)
    assert planned["bytes"] == planned["tokens"] * planned["bytes_per_token"] and "this_run" not in planned

    after = merged(cfg)
    assert storage_plan.plan(after, demo_model, hidden_capture=HiddenCapture.of(cfg))["hidden_capture"][
        "this_run"]["exports_bytes"] == {}  # the run writes none
    for trainer in planned["exports_on_demand"]:
        export(cfg, after, trainer)
    whole = storage_plan.plan(after, demo_model, hidden_capture=HiddenCapture.of(cfg))
    measured = whole["hidden_capture"]
    parts = sum(p.stat().st_size for p in after.shard_dir(0).glob("part-*.hidden.safetensors"))
    assert measured["this_run"]["parts_bytes"] == parts > 0
    assert json.loads(after.exports_manifest.read_text())["hidden_states"]["parts"]["bytes"] == parts
    assert 0.95 <= parts / planned["bytes"] <= 1.05, (parts, planned)
    made = {name: folder_bytes(after.hidden_export(name)) for name in planned["exports_on_demand"]}
    assert sorted(made) == ["specforge", "specforge_dflash", "speculators"]
    assert measured["this_run"]["exports_bytes"] == made
    for name, size in made.items():
        assert 0.95 <= size / planned["exports_on_demand"][name]["bytes"] <= 1.05, (name, size, planned)
    lines = [line for line in storage_plan.render(whole).splitlines()
             if "captured by this run" in line or "written: parts" in line or "each export when made" in line]
    assert len(lines) == 3 and "x the forecast" in lines[2], lines


def test_capture_off_plans_no_captured_states(make_config, write_jsonl, tmp_path, demo_model):
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", [{"query": "Hi?"}]), "format": "query_response",
                        "sampling": GREEDY}], shards=1)
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    result = storage_plan.plan(layout, demo_model)
    assert result["hidden_capture"] is None
    assert "captured by this run" not in storage_plan.render(result)
