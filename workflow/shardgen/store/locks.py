"""Process locks, and Snakemake's directory lock left behind after a SIGKILL.

`flock_with_pid` is the one way shardgen takes a lock: an flock on a file that then names its holder's pid (the
kernel drops the flock when the process dies, however it dies, so a lock is never stale). The shard writer, the GPU
lease and the run guard below all use it.

Snakemake leaves its directory lock behind after a SIGKILL; the next run would refuse to start. Every main
Snakemake process of this workflow holds a run guard for its results folder, .snakemake/shardgen-run-KEY.lock (KEY:
the folder's resolved path, hashed), for its whole life. A run that gets it knows no other run works on that folder,
so the lock files in .snakemake/locks/ of runs on that folder are stale: it removes them, saying so. Runs on other
results folders, which Snakemake lets work beside it, keep theirs and are none of its business. A run that cannot
get its guard within a few seconds leaves the locks alone and says that the other run on its folder is alive (its
pid), so Snakemake's advice to `--unlock` that follows is not taken while that run still writes.
"""

import atexit
import fcntl
import hashlib
import logging
import os
import sys
import time
from pathlib import Path
from typing import IO

log = logging.getLogger("shardgen")
SNAKEMAKE_STATE = Path(".snakemake")  # Snakemake's own folder, where its directory lock lives
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


def run_guard(results: Path, state_dir: Path = SNAKEMAKE_STATE) -> Path:
    """The run guard of the results folder `results`."""
    return state_dir / f"shardgen-run-{hashlib.sha256(str(Path(results).resolve()).encode()).hexdigest()[:16]}.lock"


def hold_run_guard(results: Path, state_dir: Path = SNAKEMAKE_STATE, wait_s: float = 10.0) -> bool:
    global _guard
    if _guard is not None:
        return True
    state_dir.mkdir(parents=True, exist_ok=True)
    _guard = flock_with_pid(run_guard(results, state_dir), wait_s)
    return _guard is not None


def _under(line: str, root: Path) -> bool:
    """Whether a path a lock file names (relative to the working folder, as Snakemake writes it) is under root."""
    return Path(line).resolve().is_relative_to(root)


def locks_of(results: Path, state_dir: Path = SNAKEMAKE_STATE) -> list[Path]:
    """Snakemake's lock files of runs on `results`: each run writes N.input.lock and N.output.lock; a pair is that
    folder's where every output it names is under it (a pair without outputs: where an input is)."""
    root = Path(results).resolve()
    pairs: dict[str, list[Path]] = {}  # run number -> its lock files
    for path in (state_dir / "locks").glob("*.lock"):
        pairs.setdefault(path.name.split(".")[0], []).append(path)
    mine = []
    for files in pairs.values():
        named = {p.name.split(".")[1]: [line.strip() for line in p.read_text().splitlines() if line.strip()]
                 for p in files}
        outputs = named.get("output")
        if all(_under(line, root) for line in outputs) if outputs else any(
                _under(line, root) for line in named.get("input", [])):
            mine += files
    return sorted(mine)


def clear_stale_locks(workflow, results: Path, state_dir: Path = SNAKEMAKE_STATE) -> list[Path]:
    """Snakemake's lock files left by a dead run on `results`, removed once this run holds that folder's guard; when
    another run on it is alive, none is removed and that run is named, now and again as this process exits
    (Snakemake's LockException and its --unlock advice come last otherwise, and --unlock is the one thing not to do
    while that run writes)."""
    if not workflow.is_main_process:
        return []
    if not hold_run_guard(results, state_dir):
        pid = holder(run_guard(results, state_dir))
        log.error("%s", _alive_message(pid, results))
        atexit.register(lambda: print(f"shardgen: {_alive_message(pid, results)}", file=sys.stderr))
        return []
    stale = locks_of(results, state_dir)
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        log.warning("removed %d stale Snakemake lock file(s) left by a killed run: %s",
                    len(stale), ", ".join(p.name for p in stale))
    return stale


def _alive_message(pid: str, results: Path) -> str:
    return (f"another snakemake run on {results} is alive (pid {pid}); do not use --unlock (its locks are not "
            f"stale): wait for it to finish, or stop it (Ctrl-C in its terminal, or kill -TERM {pid})")
