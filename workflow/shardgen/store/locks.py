"""Process locks, and Snakemake's directory lock left behind after a SIGKILL.

`flock_with_pid` is the one way shardgen takes a lock: an flock on a file that then names its holder's pid (the
kernel drops the flock when the process dies, however it dies, so a lock is never stale). The shard writer, the GPU
lease and the run guard below all use it.

Snakemake leaves its directory lock behind after a SIGKILL; the next run would refuse to start. Every main
Snakemake process of this workflow holds .snakemake/shardgen-run.lock for its whole life. A run that gets it knows
no other run is alive, so any lock files in .snakemake/locks/ are stale: it removes them, saying so. A run that
cannot get it within a few seconds leaves the locks alone and says that the other run is alive (its pid), so
Snakemake's advice to `--unlock` that follows is not taken while that run still writes.
"""

import atexit
import fcntl
import logging
import os
import sys
import time
from pathlib import Path
from typing import IO

log = logging.getLogger("shardgen")
SNAKEMAKE_STATE = Path(".snakemake")  # Snakemake's own folder, where its directory lock lives
RUN_GUARD = "shardgen-run.lock"  # held by every main Snakemake process of this workflow, under SNAKEMAKE_STATE
_guard = None  # the open, flock'd file: held until this process exits


def flock_with_pid(path: Path, wait_s: float = 0.0) -> IO | None:
    """The open file at `path`, exclusively flock'd and holding this process's pid, or None when another process
    still holds it after wait_s. The lock lasts until the file is closed or the process dies."""
    handle = open(path, "a+")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                return None
            time.sleep(0.2)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def holder(path: Path) -> str:
    """The pid written by the process holding the lock at `path` ("?" when it cannot be read)."""
    try:
        return Path(path).read_text().strip() or "?"
    except OSError:
        return "?"


def hold_run_guard(state_dir: Path = SNAKEMAKE_STATE, wait_s: float = 10.0) -> bool:
    global _guard
    if _guard is not None:
        return True
    state_dir.mkdir(parents=True, exist_ok=True)
    _guard = flock_with_pid(state_dir / RUN_GUARD, wait_s)
    return _guard is not None


def clear_stale_locks(workflow, state_dir: Path = SNAKEMAKE_STATE) -> list[Path]:
    """Snakemake's lock files left by a dead run, removed once this run holds the guard; when another run is alive,
    none is removed and that run is named, now and again as this process exits (Snakemake's LockException and its
    --unlock advice come last otherwise, and --unlock is the one thing not to do while that run writes)."""
    if not workflow.is_main_process:
        return []
    if not hold_run_guard(state_dir):
        pid = holder(state_dir / RUN_GUARD)
        log.error("%s", _alive_message(pid))
        atexit.register(lambda: print(f"shardgen: {_alive_message(pid)}", file=sys.stderr))
        return []
    stale = sorted((state_dir / "locks").glob("*.lock"))
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        log.warning("removed %d stale Snakemake lock file(s) left by a killed run: %s",
                    len(stale), ", ".join(p.name for p in stale))
    return stale


def _alive_message(pid: str) -> str:
    return (f"another snakemake run of this workflow is alive (pid {pid}); do not use --unlock (its locks are not "
            f"stale): wait for it to finish, or stop it (Ctrl-C in its terminal, or kill -TERM {pid})")
