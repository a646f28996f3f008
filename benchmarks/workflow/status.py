"""Time `shardgen status` on 8 shards x 1,000 parts committed by the real PartWriter (10 rows each), plus 1,000
telemetry parts per shard (the newest one gives the live tokens/s). Goal: < 1 s. Each call is a fresh
`shardgen --results DIR status` process, as a user runs it (imports included). The first (cold) call finds no
status cache (generate/checkpoint_cache.py) and writes it; the --repeats calls after it (warm) read it: cold_s is the
first, median_s/min_s/max_s the warm ones.

    python benchmarks/workflow/status.py [--shards 8] [--parts 1000] [--rows 10]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from shardgen.store import tables
from shardgen.config import Config
from shardgen.generate.attempts import log_event, start_attempt
from shardgen.layout import Layout, telemetry_path
from shardgen.generate.checkpoint import PartWriter
from shardgen.report.status import status

# start_attempt takes typed engine settings (the schema's defaults here)
ENGINE = Config.from_dict({"model": {"path": "/m"},
                           "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]}).engine


def build(root: Path, shards: int, parts: int, rows: int = 10) -> Layout:
    layout = Layout(root)
    now = datetime.now(timezone.utc)
    layout.split_dir.mkdir(parents=True)
    for shard in range(shards):
        keys = [f"{shard}-{p}-{r}" for p in range(parts) for r in range(rows)]
        keys += [f"{shard}-left-{i}" for i in range(500)]
        # status counts the rows of the current prompt set: the split's gen_keys
        pq.write_table(pa.table({"prompt_id": keys, "gen_key": keys}), layout.split(shard))
        attempt, _, _ = start_attempt(layout.shard_dir(shard), ENGINE)
        log_event(layout.shard_dir(shard), attempt, "engine_started")  # status reads telemetry once generating
        writer = PartWriter(layout.shard_dir(shard))
        for p in range(parts):
            chunk = [{"prompt_id": f"{shard}-{p}-{r}", "gen_key": f"{shard}-{p}-{r}", "shard": shard, "attempt": 1,
                      "completion": "x", "output_ids": [1, 2, 3], "finish_reason": "stop", "prompt_tokens": 5,
                      "completion_tokens": 3, "cached_tokens": 0, "latency_s": 1.0, "submitted_at": now,
                      "finished_at": now, "gpu": str(shard), "error": None} for r in range(rows)]
            writer.commit(chunk)
            # stamped after start_attempt: status reads only telemetry written since the attempt began
            decode = {**dict.fromkeys(tables.TELEMETRY.names), "ts": datetime.now(timezone.utc), "kind": "decode",
                      "running": 256, "queue": 10, "gen_throughput": 7000.0}
            pq.write_table(pa.Table.from_pylist([decode] * 10, schema=tables.TELEMETRY),
                           telemetry_path(layout.shard_dir(shard), p))
    return layout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--parts", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=10, help="rows per part")
    ap.add_argument("--repeats", type=int, default=5, help="warm calls, after the cold one")
    ap.add_argument("--save", type=Path, default=Path(__file__).parents[1] / "results" / "status.json")
    args = ap.parse_args()
    layout = build(Path(tempfile.mkdtemp(prefix="shardgen-status-")), args.shards, args.parts, args.rows)
    seconds = []
    for _ in range(1 + args.repeats):
        start = time.perf_counter()
        subprocess.run(["shardgen", "--results", str(layout.root), "status"], check=True, capture_output=True)
        seconds.append(time.perf_counter() - start)
    cold, seconds = seconds[0], seconds[1:]
    rows = status(layout)  # after the timed calls: the first of them is the cold one
    assert sum(r["committed"] for r in rows) == args.shards * args.parts * args.rows
    assert all(r["out_tok_per_s"] == 7000 for r in rows)
    result = {"shards": args.shards, "parts_per_shard": args.parts, "rows_per_part": args.rows,
              "cold_s": round(cold, 3), "median_s": round(statistics.median(seconds), 3),
              "min_s": round(min(seconds), 3), "max_s": round(max(seconds), 3), "goal_s": 1.0,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    print(json.dumps(result))
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
