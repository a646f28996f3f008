"""The helper that keeps a test's snakemake from outliving it: a timeout ends the child's whole process group."""

import os
import subprocess
import time

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
