"""Checkpoint parts: atomic parquet commits per shard, and what every shard has committed so far."""

import glob
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import tables
from shardgen.atomic import write_table

PART_PATTERN = "part-{:05d}.parquet"


def part_files(shard_dir: Path) -> list[Path]:
    return sorted(Path(shard_dir).glob("part-*.parquet"))


def committed_gen_keys(parts_glob: str) -> set[str]:
    """gen_keys with a finished generation (stop or length) in any shard's parts."""
    done = set()
    for path in glob.glob(parts_glob):
        table = pq.read_table(path, columns=["gen_key", "finish_reason"])
        keys, reasons = table["gen_key"].to_pylist(), table["finish_reason"].to_pylist()
        done.update(k for k, r in zip(keys, reasons) if r in ("stop", "length"))
    return done


def start_attempt(shard_dir: Path) -> int:
    """Record a new attempt for this shard (kept beside the parts, so it survives Snakemake's cleanup)."""
    shard_dir.mkdir(parents=True, exist_ok=True)
    log_path = shard_dir / "attempts.jsonl"
    previous = log_path.read_text().splitlines() if log_path.exists() else []
    attempt = len(previous) + 1
    entry = {"attempt": attempt, "started_at": datetime.now(timezone.utc).isoformat(), "host": socket.gethostname(),
             "pid": os.getpid(), "slurm_job_id": os.environ.get("SLURM_JOB_ID")}
    with open(log_path, "a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return attempt


def read_attempts(shard_dir: Path) -> list[dict]:
    log_path = Path(shard_dir) / "attempts.jsonl"
    return [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.exists() else []


class PartWriter:
    """Numbers and commits this shard's parts; never rewrites a committed one."""

    def __init__(self, shard_dir: Path):
        self.shard_dir = Path(shard_dir)
        existing = part_files(self.shard_dir)
        self.next_index = int(existing[-1].stem.split("-")[1]) + 1 if existing else 0

    def commit(self, rows: list[dict]) -> Path:
        path = self.shard_dir / PART_PATTERN.format(self.next_index)
        write_table(pa.Table.from_pylist(rows, schema=tables.PART), path)
        self.next_index += 1
        return path
