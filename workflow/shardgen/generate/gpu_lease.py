"""Lease GPU ids from a node-local pool of flock'd files; the kernel frees a lease when its process dies.

Snakemake only counts `gpu=N`; it never says which GPU. Call `lease` before torch (or SGLang) is imported.
"""

import logging
import os
import socket
import tempfile
import time
from pathlib import Path

from shardgen import ShardgenError
from shardgen.store.locks import flock_with_pid

_held: list = []  # open lock files: the lease lasts as long as the process
_leased: list[str] = []
log = logging.getLogger(__name__)


class LeaseTimeout(ShardgenError, RuntimeError):
    pass


def default_lock_dir() -> Path:
    # Node-local on purpose: a shared filesystem's flock may not be honoured across nodes.
    return Path(os.environ.get("SHARDGEN_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / f"shardgen-gpus-{os.getuid()}")


def candidates(total_gpus: int) -> list[str]:
    """The GPUs this process may use: what CUDA_VISIBLE_DEVICES lists (Slurm, a user), else 0..total-1."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return [g.strip() for g in visible.split(",") if g.strip()]
    return [str(i) for i in range(total_gpus)]


def lease(count: int, total_gpus: int, timeout_s: float = 600, lock_dir: Path | None = None) -> list[str]:
    """Hold `count` free GPU ids, set CUDA_VISIBLE_DEVICES to them and return them; wait up to timeout_s.
    A process that already holds a lease (several shards in one `shardgen retry`) keeps using it."""
    if _leased:
        return list(_leased)
    pool = candidates(total_gpus)
    if count > len(pool):
        raise LeaseTimeout(f"need {count} GPU(s) but only {pool} are available to this job")
    lock_dir = Path(lock_dir or default_lock_dir())
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        got = []
        for gpu in pool:
            if handle := flock_with_pid(lock_dir / f"gpu{gpu}.lock"):
                got.append((gpu, handle))
                if len(got) == count:
                    _held.extend(h for _, h in got)
                    ids = [g for g, _ in got]
                    _leased.extend(ids)
                    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
                    return ids
        for _, handle in got:  # all or nothing, so two jobs never deadlock on halves
            handle.close()
        if time.monotonic() > deadline:
            raise LeaseTimeout(f"no {count} free GPU(s) among {pool} after {timeout_s:.0f}s (locks in {lock_dir})")
        time.sleep(0.5)


def lease_for(config) -> str:
    """The GPU ids this job runs on, as a string for the parts' `gpu` column ("cpu" without GPUs)."""
    if config.gpus == 0:
        return "cpu"
    ids = lease(config.engine.gpus_per_engine, config.gpus)
    log.info("leased GPU(s) %s on %s", ids, socket.gethostname())
    return ",".join(ids)
