"""The helper that keeps a test's snakemake from outliving it: a timeout ends the child's whole process group."""

import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import own_group


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_timeout_ends_the_whole_process_group():
    # A shell that ignores SIGINT, with a grandchild: only SIGKILL of the group ends both.
    proc = subprocess.Popen(["bash", "-c", "trap '' INT; sleep 300 & sleep 300; wait"], start_new_session=True,
                            stdout=subprocess.PIPE, text=True)
    with pytest.raises(subprocess.TimeoutExpired):
        with own_group(proc, grace_s=1):
            proc.communicate(timeout=1)
    deadline = time.monotonic() + 10
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(proc.pid), "a process of the child's group is still running"


def test_the_slurm_test_starts_its_snakemake_in_its_own_process_group(tmp_path):
    spec = importlib.util.spec_from_file_location("slurm_test",
                                                  Path(__file__).parent.parent / "slurm" / "test_slurm.py")
    slurm_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(slurm_test)
    with own_group(slurm_test.snakemake(tmp_path), grace_s=5) as proc:
        assert os.getpgid(proc.pid) == proc.pid  # so own_group can end it and everything it started
