"""Each run of a shard is an attempt, logged in generate/shard-NNN/attempts.jsonl beside the parts (Snakemake's
cleanup never touches it). An attempt that never logged `finished` died: SGLang kills its whole process tree when
its scheduler dies, so the cause is whatever the attempt logged before (out of memory, a stall) or `killed`.

After an out-of-memory death the next attempt lowers memory (mem_fraction_static -0.03, the running cap -25%, per
such death in a row, at most MAX_RESTARTS times). How many automatic restarts happen is Snakemake's `retries`
(3 in the profiles); a person rerunning by hand is never refused."""

import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

from shardgen.config_sections import EngineConfig
from shardgen.engines import backend
from shardgen.layout import ATTEMPTS

MAX_RESTARTS = 3
OOM_MARKERS = ("CUDA out of memory", "OutOfMemoryError", "out of memory")


def _append(shard_dir: Path, entry: dict) -> None:
    shard_dir.mkdir(parents=True, exist_ok=True)
    with open(shard_dir / ATTEMPTS, "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _read_log(shard_dir: Path) -> list[dict]:
    path = Path(shard_dir) / ATTEMPTS
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def read_attempts(shard_dir: Path) -> list[dict]:
    """One record per attempt: its start entry, `status` (finished, or died: also while still running) and `cause`."""
    attempts: dict[int, dict] = {}
    for entry in _read_log(shard_dir):
        if "event" not in entry:
            attempts[entry["attempt"]] = {**entry, "status": "died", "cause": "killed"}
            continue
        record = attempts.setdefault(entry["attempt"], {"attempt": entry["attempt"]})
        if entry["event"] == "finished":
            record.update(status="finished", cause=None, finished_at=entry["at"])
        elif entry["event"] in ("out_of_memory", "stalled"):
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


def is_oom_line(line: str) -> bool:
    return any(marker in line for marker in OOM_MARKERS)
