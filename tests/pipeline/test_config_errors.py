"""A config mistake stops `snakemake` at parse time with shardgen's message alone: no traceback lines into the
rule files, and a model folder that does not exist named as `model.path` (not as a missing input file)."""

import pytest

from conftest import copy_workflow
from helpers import snakemake


@pytest.fixture
def workdir(tmp_path):
    return copy_workflow(tmp_path)


@pytest.mark.parametrize("overlay, message", [
    ("model: {path: no/such/model}\n", "shardgen: model.path no/such/model: not found"),
    ("shards: -3\n", "shardgen: invalid config: shards: -3 is less than the minimum of 1"),
    ("sources: [{name: a, path: no/such.jsonl, format: sharegpt}]\n",
     "shardgen: source 'a': file no/such.jsonl not found"),
])
def test_a_config_error_prints_its_message_alone(workdir, overlay, message):
    (workdir / "config" / "test.yaml").write_text(overlay)
    run = snakemake(workdir, "-n", timeout=120)
    assert run.returncode != 0
    assert run.stdout.splitlines()[-1].startswith(message), run.stdout[-2000:]
    assert "File \"" not in run.stdout and ".smk" not in run.stdout and "MissingInputException" not in run.stdout


def test_the_demo_model_folder_the_workflow_builds_is_no_error(workdir):
    (workdir / "config" / "test.yaml").write_text("{}\n")
    run = snakemake(workdir, "-n", timeout=120)
    assert run.returncode == 0 and "demo_model" in run.stdout, run.stdout[-2000:]
