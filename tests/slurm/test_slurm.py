"""The demo workflow on a real Slurm through `--workflow-profile profiles/slurm`: generate jobs are Slurm jobs,
the dataset is exactly-once and the report balances; a shard's job cancelled mid-generation resumes from its
committed parts when the same command runs again.

The cluster is the one already running, or one started from Debian's packages by slurm-up.sh and stopped by
slurm-down.sh (by pid) at the end. If it cannot start, the tests are skipped with the reason, or fail when
SHARDGEN_REQUIRE_SLURM=1 (as .ci/run sets)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_workflow, own_group, wait_for
from helpers import check_results

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
# The site settings of profiles/slurm, fitted to a 2-core test node: everything else comes from the profile.
SITE = ["--default-resources", "slurm_partition=debug", "mem_mb=1500", "runtime=30", "cpus_per_task=1",
        "--set-resources", "generate:mem_mb=2500", "generate:cpus_per_task=1", "prompts:mem_mb=2500",
        "merge:mem_mb=2500", "--slurm-init-seconds-before-status-checks", "5", "--retries", "0"]


def _plugin_installed() -> bool:
    return importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None


def _idle() -> bool:
    if not shutil.which("sinfo"):
        return False
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    return out.returncode == 0 and "idle" in out.stdout.split()


def _unavailable(reason: str):
    if os.environ.get("SHARDGEN_REQUIRE_SLURM") == "1":
        pytest.fail(f"Slurm is required (SHARDGEN_REQUIRE_SLURM=1) but {reason}")
    print(f"\nSlurm tests skipped: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    if not _plugin_installed():
        _unavailable("the Slurm executor plugin is not installed (pip install -e '.[slurm]')")
    if _idle():
        yield "already running"
        return
    if os.geteuid() != 0:
        _unavailable("starting a cluster needs root")
    env = {**os.environ, "SLURM_CI_DIR": str(tmp_path_factory.mktemp("slurm-ci"))}
    up = subprocess.run(["bash", str(HERE / "slurm-up.sh")], env=env, capture_output=True, text=True, timeout=300)
    try:
        if up.returncode != 0 or not _idle():
            _unavailable(f"slurm-up.sh failed (rc {up.returncode}): {(up.stderr or up.stdout)[-1500:]}")
        yield "started"
    finally:
        subprocess.run(["bash", str(HERE / "slurm-down.sh")], env=env, capture_output=True, timeout=120)


def snakemake(work: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    cmd = [str(BIN / "snakemake"), "--workflow-profile", "profiles/slurm",
           "--configfile", "config/demo.yaml", "config/test.yaml", *SITE]
    return subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **popen)


def test_demo_on_slurm_with_a_cancelled_shard(slurm_cluster, tmp_path):
    work = copy_workflow(tmp_path)
    (work / "config" / "test.yaml").write_text(
        "shards: 2\ncheckpoint: {every_records: 4, every_seconds: 1}\ndefaults: {max_new_tokens: 160}\n"
        "engine: {max_running_requests: 4}\n")
    with own_group(snakemake(work)) as run:
        parts = wait_for(run, lambda: list(work.glob("results/generate/shard-*/part-00001.parquet")),
                         "second part committed")
        shard_dir = parts[0].parent
        job_id = json.loads((shard_dir / "attempts.jsonl").read_text().splitlines()[0])["slurm_job_id"]
        assert job_id, "the generate job did not run as a Slurm job"
        subprocess.run(["scancel", job_id], check=True)
        out, _ = run.communicate(timeout=300)
        assert run.returncode != 0, "the run should fail: one of its jobs was cancelled"
    committed = {p: p.read_bytes() for p in shard_dir.glob("part-*.parquet")}

    with own_group(snakemake(work)) as rerun:
        out, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, out[-4000:]
    assert "has been submitted with SLURM jobid" in out
    for path, data in committed.items():
        assert path.read_bytes() == data, f"{path.name} changed after the resume"
    check_results(work)
    for done in work.glob("results/generate/shard-*.done.json"):
        attempts = json.loads(done.read_text())["attempts"]
        assert all(a["slurm_job_id"] for a in attempts), attempts
    cancelled = json.loads((shard_dir.parent / f"{shard_dir.name}.done.json").read_text())["attempts"]
    assert len(cancelled) == 2 and cancelled[0]["slurm_job_id"] == job_id != cancelled[1]["slurm_job_id"]
