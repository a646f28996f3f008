"""The workflow declares exports/hidden/ as merge's output only when capture.hidden_states is on (a directory():
merge replaces each trainer's folder whole), so Snakemake neither expects it of a run without capture nor misses it
in one with it."""

import subprocess
import sys

import pytest
import yaml
from conftest import REPO


@pytest.mark.parametrize("enabled", [True, False])
def test_merge_declares_the_hidden_exports_only_when_captured(tmp_path, demo_model, enabled):
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
    assert (str(tmp_path / "results" / "exports" / "hidden") in merge_outputs[0].split(", ")[-1]) is enabled
