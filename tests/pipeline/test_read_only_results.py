"""A results folder the run cannot write (issue 38, item 5: a read-only file system gave an OSError in common.smk
and 8 frames): one line naming the folder and what to do, as a config error is. The folder is a real read-only
file system: a tmpfs mounted read-only in a mount namespace of the snakemake process alone."""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, copy_workflow

pytestmark = pytest.mark.slow
SNAKEMAKES_OWN = ("Using workflow specific profile", "Config file config/config.yaml is extended")


def _read_only_mounts_work(folder: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro tmpfs '{folder}' && "
                            f"! touch '{folder}/probe' 2>/dev/null"], capture_output=True)
    return probe.returncode == 0


def test_a_read_only_results_folder_is_one_line_naming_it(tmp_path):
    work = copy_workflow(tmp_path)
    results = work / "results"
    results.mkdir()
    if not _read_only_mounts_work(results):
        pytest.skip("needs `unshare -rm` and a tmpfs mount (user and mount namespaces) for a read-only folder")
    snakemake = f"{BIN / 'snakemake'} --configfile config/demo.yaml --cores 1 -n"
    run = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro tmpfs results && exec {snakemake}"],
                         cwd=work, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    said = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    ours = [line for line in said if not line.startswith(SNAKEMAKES_OWN)]  # its profile and config-file notes
    assert ours == [said[-1]] and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert said[-1].startswith("shardgen: results_dir results: cannot write there (Read-only file system: ")
    assert "set results_dir to a writable folder or make this one writable" in said[-1]
