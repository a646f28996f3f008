"""Snakemake leaves its directory lock behind after a SIGKILL; the next run would refuse to start.

Every main Snakemake process of this workflow holds an flock on .snakemake/shardgen-run.lock for its whole life
(the kernel drops it when the process dies, however it dies). A run that gets that flock knows no other run is
alive, so any lock files in .snakemake/locks/ are stale: it removes them, saying so. A run that cannot get it
within a few seconds leaves the locks alone and says that the other run is alive (its pid), so Snakemake's advice
to `--unlock` that follows is not taken while that run still writes.
"""

import fcntl
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("shardgen")
_guard = None  # the open, flock'd file: held until this process exits


def hold_run_guard(state_dir: Path = Path(".snakemake"), wait_s: float = 10.0) -> bool:
    global _guard
    if _guard is not None:
        return True
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = open(state_dir / "shardgen-run.lock", "a+")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                return False
            time.sleep(0.2)
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        _guard = handle
        return True


def clear_stale_locks(workflow, state_dir: Path = Path(".snakemake")) -> list[Path]:
    if not workflow.is_main_process:
        return []
    if not hold_run_guard(state_dir):
        holder = (state_dir / "shardgen-run.lock").read_text().strip() or "?"
        log.error("another snakemake run of this workflow is alive (pid %s): its locks are not stale, so do not "
                  "use --unlock; wait for it to finish or stop it (Ctrl-C, or kill -TERM %s)", holder, holder)
        return []
    stale = sorted((state_dir / "locks").glob("*.lock"))
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        log.warning("removed %d stale Snakemake lock file(s) left by a killed run: %s",
                    len(stale), ", ".join(p.name for p in stale))
    return stale
