"""The README's step-by-step commands, "the demo's own", run as written in a copy of the workflow (issue 45, item
10): they read the demo's config, not the production one, and make the demo's dataset and report."""

import json
import os
import re
import subprocess

import pytest

from conftest import BIN, REPO, copy_workflow

pytestmark = pytest.mark.slow


def steps() -> str:
    """The README's block of the steps' commands."""
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    (block,) = [b for b in blocks if "shardgen demo-model" in b]
    return block


def test_the_readmes_step_commands_run_as_written_on_the_demo(tmp_path):
    work = copy_workflow(tmp_path)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SHARDGEN_CONFIG", None)  # a reader's shell: only what the block sets
    ran = subprocess.run(["bash", "-e", "-c", steps()], cwd=work, env=env, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    summary = json.loads((work / "results" / "report" / "summary.json").read_text())
    assert summary["generated"] == summary["prompts_accepted"] == 135  # the demo's prompt set, every prompt
    assert sorted(p.name for p in (work / "results" / "split").iterdir()) == ["shard-000.parquet", "shard-001.parquet"]
