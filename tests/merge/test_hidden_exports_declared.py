"""The workflow declares no hidden-state export as merge's output, with capture.hidden_states on or off: the parts'
states files are the one copy and `shardgen export-hidden` makes a trainer's export on demand, so a run never
writes (nor Snakemake expects, nor removes) a copy of the states under exports/hidden/."""

import subprocess
import sys

import pytest
import yaml
from conftest import REPO


@pytest.mark.parametrize("enabled", [True, False])
def test_merge_declares_no_hidden_export(tmp_path, demo_model, enabled):
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(tmp_path / "results"))
    raw["model"]["path"] = str(demo_model)
    raw["capture"] = {**raw.get("capture", {}), "hidden_states": {"enabled": enabled}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    command = [sys.executable, "-m", "snakemake", "-n", "-c1", "--configfile", str(tmp_path / "config.yaml")]
    plan = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    merge_outputs = [line for line in plan.stdout.splitlines() if "output:" in line and "dataset/data.parquet" in line]
    assert len(merge_outputs) == 1
    assert "exports/manifest.json" in merge_outputs[0] and "exports/hidden" not in merge_outputs[0]
