"""An attempt's life: each run of a shard is an attempt, logged in generate/shard-NNN/attempts.jsonl beside the
parts (Snakemake's cleanup never touches it): its start (with the out-of-memory backoff it starts under), its
events, its heartbeat while it runs, and whether it is alive, for `shardgen status`.

An attempt that never logged `finished` ended early: `interrupted` (Ctrl-C: a KeyboardInterrupt, logged on its way
out), or it died: SGLang kills its whole process tree when its scheduler dies, so the cause is whatever the attempt
logged before (out of memory, a stall, a full disk) or `killed`.

After an out-of-memory death the next attempt starts under its backend's backoff (`Backend.after_oom`; SGLang:
memory_share -0.03, the running cap -25%, per such death in a row), at most MAX_RESTARTS times. How many automatic
restarts happen is Snakemake's `retries` (3 in the profiles); a person rerunning by hand is never refused.

The heartbeat: the process rewrites generate/shard-NNN/heartbeat.json every BEAT_SECONDS from the start of its
attempt (also while the engine starts, which takes minutes); a heartbeat older than STALE_SECONDS, or a process
that is gone from this host, means the attempt is down: a SIGKILL leaves no trace but the silence."""

import json
import os
import socket
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from shardgen.config.sections import EngineConfig
from shardgen.engines.registry import backend
from shardgen.layout import attempts_path, heartbeat_path
from shardgen.store.atomic import replace_text

MAX_RESTARTS = 3
BEAT_SECONDS = 5.0
STALE_SECONDS = 30.0  # six beats missed: a loaded or shared filesystem delays a write, never by this much
INTERRUPTED = "interrupted"
FINISHED = "finished"
DISK_FULL = "disk_full"  # a commit met a full disk: the attempt's cause, and no restart until there is room


def _append(shard_dir: Path, entry: dict) -> None:
    shard_dir.mkdir(parents=True, exist_ok=True)
    with open(attempts_path(shard_dir), "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _read_log(shard_dir: Path) -> list[dict]:
    path = attempts_path(shard_dir)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def read_attempts(shard_dir: Path) -> list[dict]:
    """One record per attempt: its start entry, `status` (finished, interrupted, or died: also while still running)
    and `cause`."""
    attempts: dict[int, dict] = {}
    for entry in _read_log(shard_dir):
        if "event" not in entry:
            attempts[entry["attempt"]] = {**entry, "status": "died", "cause": "killed"}
            continue
        record = attempts.setdefault(entry["attempt"], {"attempt": entry["attempt"]})
        if entry["event"] == "finished":
            record.update(status=FINISHED, cause=None, finished_at=entry["at"])
        elif entry["event"] == INTERRUPTED:
            record.update(status=INTERRUPTED, cause=INTERRUPTED, finished_at=entry["at"])
        elif entry["event"] in ("out_of_memory", "stalled", DISK_FULL):
            record.update(cause=entry["event"], detail=entry.get("detail"))
        elif entry["event"] == "engine_started":
            record.update(max_running_requests=entry.get("max_running_requests"), engine_started_at=entry["at"])
    return [attempts[k] for k in sorted(attempts)]


def deaths_in_a_row(attempts: list[dict]) -> list[dict]:
    run = []
    for record in reversed(attempts):
        if record.get("status") == "finished":
            break
        run.append(record)
    return list(reversed(run))


def start_attempt(shard_dir: Path, configured: EngineConfig) -> tuple[int, EngineConfig, list[dict]]:
    """Log a new attempt; return its number, the engine settings to use, and the deaths it restarts after."""
    previous = read_attempts(shard_dir)
    deaths = deaths_in_a_row(previous)
    engine = configured
    if ooms := min(MAX_RESTARTS, sum(d["cause"] == "out_of_memory" for d in deaths)):
        last_cap = next((d["max_running_requests"] for d in reversed(deaths) if d.get("max_running_requests")), None)
        engine = backend(configured.backend).after_oom(configured, ooms, last_cap)  # the backend's own backoff
    attempt = (previous[-1]["attempt"] if previous else 0) + 1
    before = configured.as_dict()
    overrides = {k: v for k, v in engine.as_dict().items() if before[k] != v}
    _append(shard_dir, {"attempt": attempt, "started_at": datetime.now(timezone.utc).isoformat(),
                        "host": socket.gethostname(), "pid": os.getpid(),
                        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                        "restart_after": [d["cause"] for d in deaths], "engine_overrides": overrides})
    return attempt, engine, deaths


def log_event(shard_dir: Path, attempt: int, event: str, **detail) -> None:
    _append(shard_dir, {"attempt": attempt, "event": event, "at": datetime.now(timezone.utc).isoformat(), **detail})


def _beat(path: Path, attempt: int) -> None:
    # A sign of life, not a result: status never reads half of one, and a full disk leaves no half-written beat.
    replace_text(json.dumps({"attempt": attempt, "pid": os.getpid(), "host": socket.gethostname(),
                             "at": time.time()}), path)


@contextmanager
def running(shard_dir: Path, attempt: int):
    """The attempt's run: its heartbeat kept fresh while the block runs, and a Ctrl-C logged as `interrupted`
    (so status does not call a clean stop a kill)."""
    path = heartbeat_path(shard_dir)
    _beat(path, attempt)
    stop = threading.Event()

    def loop():
        while not stop.wait(BEAT_SECONDS):
            try:
                _beat(path, attempt)
            except OSError:  # a full or flaky disk must not kill generation; status will call it down
                pass
    thread = threading.Thread(target=loop, name="shardgen-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    except KeyboardInterrupt:
        log_event(shard_dir, attempt, INTERRUPTED)
        raise
    finally:
        stop.set()
        thread.join()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process of that number: alive as far as we can tell
        return True
    return True


def alive(shard_dir: Path, attempt: dict, now: float) -> tuple[bool, float | None]:
    """(is the attempt's process alive, when it last gave a sign of life). Without a heartbeat file (a run
    started by an older shardgen) the attempt record's pid is checked on its own host."""
    beat = None
    try:
        beat = json.loads(heartbeat_path(shard_dir).read_text())
    except (OSError, ValueError):
        pass
    if beat and beat.get("attempt") == attempt["attempt"]:
        fresh = now - beat["at"] <= STALE_SECONDS
        here = beat["host"] == socket.gethostname()
        return fresh and (not here or _pid_alive(beat["pid"])), beat["at"]
    if attempt.get("host") == socket.gethostname() and attempt.get("pid"):
        return _pid_alive(attempt["pid"]), None
    return False, None


def liveness(shard_dir: Path, now: float) -> dict | None:
    """The newest attempt as status shows it, or None before the first: `state` (starting, generating, finished,
    interrupted, down:CAUSE), `silent_s` (seconds since its last sign of life), `attempt` (its record) and
    `running` (whether its process is alive)."""
    attempts = read_attempts(shard_dir)
    if not attempts:
        return None
    last = attempts[-1]
    started = datetime.fromisoformat(last["started_at"]).timestamp()
    is_alive, last_sign = alive(shard_dir, last, now)
    if last.get("status") == INTERRUPTED:  # over, even while its process is still on its way out
        is_alive, state = False, INTERRUPTED
    elif last.get("status") == FINISHED:  # over too: its process may still be writing the done file, or long gone
        is_alive, state = False, FINISHED
    elif is_alive:
        state = "generating" if "engine_started_at" in last else "starting"
    else:
        state = f"down:{last.get('cause') or 'killed'}"
    return {"state": state, "silent_s": round(now - (last_sign or started)), "attempt": last, "running": is_alive,
            "started": started}
