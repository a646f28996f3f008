"""ETA accuracy on a real run: generate one shard (any engine: SGLang on a GPU, or the CPU demo) while polling
`shardgen status`'s ETA; report the ETA given once 10% (and 25%, 50%) of the output tokens were committed against
the run's actual duration (attempt start to last commit). Goal: within 10% at 10%.

    snakemake --configfile CONFIG results/split/shard-000.parquet     # prompts and split first
    python benchmarks/workflow/eta_accuracy.py --config CONFIG [--shard 0]     # on the GPU machine: one H200, one shard

The shard must not have been generated yet (`shardgen reset N` moves its parts aside).
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from shardgen.report import eta
from shardgen.generate.attempts import read_attempts
from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.generate.checkpoint import part_files
from shardgen.report.status import status

MARKS = (0.1, 0.25, 0.5)


def run(config_path: Path, shard: int, poll_s: float) -> dict:
    config = Config.from_file(config_path)
    layout = Layout(config.results)
    if part_files(layout.shard_dir(shard)):
        sys.exit(f"shard {shard} already has parts: shardgen reset {shard} first")
    job = subprocess.Popen([sys.executable, "-m", "shardgen.cli", "--config", str(config.write_resolved()),
                            "generate", "--shard", str(shard), "--done", str(layout.done(shard))])
    polls = []
    while job.poll() is None:
        now = time.time()
        rows = [r for r in status(layout) if r["shard"] == shard]
        shard_run = eta.annotate(layout, rows, now)
        polls.append((now, shard_run["output_tokens_committed"], shard_run["eta_s"]))
        time.sleep(poll_s)
    if job.returncode:
        sys.exit(f"generate failed (rc {job.returncode})")
    total = eta.annotate(layout, [r for r in status(layout) if r["shard"] == shard])["output_tokens_committed"]
    started = datetime.fromisoformat(read_attempts(layout.shard_dir(shard))[-1]["started_at"]).timestamp()
    finished = max(p.stat().st_mtime for p in part_files(layout.shard_dir(shard)))
    duration = finished - started
    marks = {}
    for mark in MARKS:
        at, committed, eta_s = next(p for p in polls if p[1] >= mark * total and p[2] is not None)
        marks[f"{mark:.0%}"] = {"at_s": round(at - started, 1), "committed_share": round(committed / total, 4),
                                "predicted_s": round(at + eta_s - started, 1),
                                "error_of_duration": round((at + eta_s - finished) / duration, 4)}
    return {"config": str(config_path), "shard": shard, "output_tokens": total, "duration_s": round(duration, 1),
            "marks": marks, "engine": config.engine.backend, "host": platform.node(),
            "measured_at": datetime.now(timezone.utc).isoformat()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between status polls")
    ap.add_argument("--save", type=Path, default=Path(__file__).parents[1] / "results" / "eta_accuracy.json")
    args = ap.parse_args()
    result = run(args.config, args.shard, args.poll)
    print(json.dumps(result, indent=1))
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
