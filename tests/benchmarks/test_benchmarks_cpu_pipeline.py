"""benchmarks/cpu/cpu_pipeline.py's prompts part on the fewest rows that start the stage's workers: every stage and
the floor process run against today's tables (the floor builds prompts rows by hand: a new column must reach it),
and the saved JSON holds the figures benchmarks/README.md reports."""

import json
import os
import subprocess
import sys

import pytest

from shardgen.prompts.pool import small_input_rows

from conftest import REPO


@pytest.mark.slow  # two prompts processes and the floor process: ~30 s on 2 cores
def test_prompts_part_measures_each_worker_count_against_the_floor(tmp_path):
    saved = tmp_path / "cpu_pipeline.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "workflow"), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "cpu" / "cpu_pipeline.py"), "--parts", "prompts",
                    "--rows", str(small_input_rows()), "--workers", "1,2", "--component-rows", "200",
                    "--tokenizers", "demo", "--workdir", str(tmp_path / "work"), "--save", str(saved)],
                   env=env, check=True, stdout=subprocess.DEVNULL)

    (entry,) = json.loads(saved.read_text())["prompts"]
    assert entry["tokenizer"] == "demo (2,048)" and entry["floor"]["rows"] == small_input_rows()
    assert [(r["workers"], r["workers_run"]) for r in entry["runs"]] == [(1, 1), (2, 2)]
    assert all("failed" not in r and r["rows_per_s"] > 0 and r["over_floor"] > 0 for r in entry["runs"])
    assert entry["runs"][0]["speedup_vs_1"] == 1.0
    assert {"render", "ids", "gen_key", "row_building"} <= set(entry["per_row_cpu_us"])
