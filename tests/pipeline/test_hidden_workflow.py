"""The demo with capture.hidden_states on, through the real `snakemake` CLI to its report, on the CPU engine and on
the SGLang adapter against tests/fake_sglang: the run ends green, the summary and report.md show the hidden states
(turns captured, layers, dtype, the parts' bytes), no copy of them is written beside the parts, and `shardgen
export-hidden` makes each trainer's export from them, which the trainer's own offline code reads
(tests/hidden_loaders.py)."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

import hidden_loaders
from conftest import (BIN, FAKE_SGLANG_DEMO, copy_workflow, demo_snakemake, fake_sglang_run, load_yaml_files,
                      own_group)
from helpers import check_results
from shardgen.capture import named_layers
from shardgen.layout import Layout
from shardgen.merge.hidden_exports import TRAINERS
from shardgen.merge.hidden_writers import DFLASH_SHORT

pytestmark = pytest.mark.slow
CAPTURE = {"shards": 2, "capture": {"hidden_states": {"enabled": True}}}


@pytest.fixture(scope="module", params=["transformers", "sglang"])
def captured_demo(tmp_path_factory, request, demo_model) -> Path:
    """The demo run to its report with hidden states captured, on the CPU engine or the SGLang adapter over its
    fake, and its whole config as a user's one file."""
    work = copy_workflow(tmp_path_factory.mktemp(f"hidden-{request.param}"), demo_model)
    sglang = request.param == "sglang"
    (work / "config" / "test.yaml").write_text(yaml.safe_dump({**CAPTURE, **(FAKE_SGLANG_DEMO if sglang else {})}))
    with pytest.MonkeyPatch.context() as env:
        args = fake_sglang_run(env, work) if sglang else ()
        with own_group(demo_snakemake(work, *args, start_new_session=True)) as proc:
            out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    (work / "config" / "run.yaml").write_text(yaml.safe_dump(load_yaml_files(
        *(work / "config" / name for name in ("config.yaml", "demo.yaml", "test.yaml")))))
    return work


def test_a_run_with_hidden_states_ends_green_and_its_report_shows_them(captured_demo):
    summary = check_results(captured_demo)
    res = captured_demo / "results"
    backend = yaml.safe_load((captured_demo / "config" / "run.yaml").read_text())["engine"]["backend"]
    assert {json.loads(done.read_text())["engine"]["backend"] for done in res.glob("generate/*.done.json")} == {backend}
    model = json.loads((res / "demo-model" / "config.json").read_text())
    parts = sorted(res.glob("generate/shard-*/part-*.hidden.safetensors"))
    hidden = summary["hidden_states"]
    assert hidden["turns_captured"] == hidden["turns"] == summary["dataset_rows"]
    assert hidden["layers"] == named_layers("eagle3", model["num_hidden_layers"]) and hidden["dtype"] == "bfloat16"
    assert (hidden["parts_files"], hidden["parts_bytes"]) == (len(parts), sum(p.stat().st_size for p in parts))
    assert hidden["exportable"] == sorted(TRAINERS) and hidden["skipped"] == {}
    assert not (res / "exports" / "hidden").exists()  # the parts hold the one copy
    # the time spent: every captured turn's pass, each over its prompt and output positions, in the done files
    passes = hidden["pass"]
    assert passes["turns"] == hidden["turns_captured"] and passes["pass_s"] > 0
    assert passes["positions"] == sum(len(json.loads(line)["input_ids"])
                                      for line in (res / "exports" / "turns.jsonl").read_text().splitlines())
    line = [text for text in (res / "report" / "report.md").read_text().splitlines()
            if text.startswith("Hidden states: ")]
    assert line == [f"Hidden states: {hidden['turns_captured']} of {hidden['turns']} turns captured at layers "
                    f"{hidden['layers']} (bfloat16), {hidden['parts_bytes']:,} bytes in {len(parts)} parts' states "
                    f"files; the capture passes re-read {passes['positions']:,} positions in "
                    f"{passes['pass_s']:,.1f} s summed over turns (docs/engine.md: the split); each trainer's export "
                    "on demand: `shardgen export-hidden --trainer specforge|specforge_dflash|speculators`."]


@pytest.mark.parametrize("trainer", TRAINERS)
def test_each_trainer_reads_the_export_the_command_makes(captured_demo, trainer):
    made = subprocess.run([str(BIN / "shardgen"), "--config", "config/run.yaml", "export-hidden", "--trainer",
                           trainer], cwd=captured_demo, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    layout = Layout(captured_demo / "results")
    folder = layout.hidden_export(trainer)
    written = hidden_loaders.record(folder)
    assert f"train: {written['train']['command']}" in made.stdout
    assert hidden_loaders.LOADERS[trainer](folder, layout) == written["samples"] > 0
    rows = json.loads((layout.report.summary).read_text())["dataset_rows"]
    assert written["samples"] + sum(written["left_out"].values()) == rows
    assert set(written["left_out"]) <= ({DFLASH_SHORT} if trainer == "specforge_dflash" else set())
