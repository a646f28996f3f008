"""GPU leases across real processes: distinct ids, freed by the kernel on SIGKILL, a pre-set list respected."""

import os
import signal
import subprocess
import sys
import time

import pytest

from shardgen.generate.gpu_lease import LeaseTimeout, lease

HOLD = """
import os, sys, time
from shardgen.generate.gpu_lease import lease
ids = lease(int(sys.argv[1]), total_gpus=int(sys.argv[2]), timeout_s=float(sys.argv[3]))
print(",".join(ids), os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
time.sleep(60)
"""


def holder(tmp_path, count=1, total=4, timeout=5.0, visible=None):
    env = {**os.environ, "SHARDGEN_GPU_LOCK_DIR": str(tmp_path)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(count), str(total), str(timeout)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def leased(proc) -> list[str]:
    line = proc.stdout.readline().split()
    if not line:
        raise AssertionError(proc.stderr.read())
    assert line[0] == line[1]  # CUDA_VISIBLE_DEVICES is what was leased
    return line[0].split(",")


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def test_concurrent_processes_get_distinct_ids(tmp_path, procs):
    procs += [holder(tmp_path) for _ in range(4)]
    ids = [leased(p)[0] for p in procs]
    assert sorted(ids) == ["0", "1", "2", "3"]


def test_a_killed_holder_frees_its_id(tmp_path, procs):
    procs += [holder(tmp_path, total=2), holder(tmp_path, total=2)]
    first, second = leased(procs[0]), leased(procs[1])
    waiting = holder(tmp_path, total=2, timeout=30)
    procs.append(waiting)
    time.sleep(1.0)
    assert waiting.poll() is None  # blocked: both GPUs are held
    procs[0].send_signal(signal.SIGKILL)
    assert leased(waiting) == first
    assert second != first


def test_preset_visible_devices_are_respected(tmp_path, procs):
    procs += [holder(tmp_path, visible="5,7"), holder(tmp_path, visible="5,7")]
    assert sorted(leased(p)[0] for p in procs) == ["5", "7"]
    procs.append(holder(tmp_path, count=2, visible="2,6"))
    assert leased(procs[-1]) == ["2", "6"]


def test_timeout_and_impossible_requests(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(LeaseTimeout, match=r"need 2 GPU\(s\) but only \['3'\]"):
        lease(2, total_gpus=8, lock_dir=tmp_path)
    proc = holder(tmp_path, visible="3")
    try:
        leased(proc)
        with pytest.raises(LeaseTimeout, match="no 1 free GPU"):
            lease(1, total_gpus=8, timeout_s=0.5, lock_dir=tmp_path)
    finally:
        proc.kill()
        proc.wait()
