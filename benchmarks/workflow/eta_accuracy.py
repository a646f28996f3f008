"""ETA accuracy on a real run: generate one shard (any engine: SGLang on a GPU, or the CPU demo) while polling
`shardgen status`'s ETA; report the ETA given once 10% (and 25%, 50%) of the output tokens were committed against
the run's actual duration (attempt start to last commit). Goal: within 10% at 10%.

    snakemake --configfile CONFIG results/split/shard-000.parquet     # prompts and split first
    python benchmarks/workflow/eta_accuracy.py --config CONFIG [--shard 0]     # on the GPU machine: one H200, one shard
    python benchmarks/workflow/eta_accuracy.py --cpu WORKDIR [--prompts 1200]  # the CPU demo engine, its own workload

The shard must not have been generated yet (`shardgen reset N` moves its parts aside). The CPU workload: prompts of
one length ("Count from 1000 to 1040, ..."), since on a CPU speed depends on prompt length and the split's heaviest-
first order would make the early rate slower than the late one; 64 new tokens; a part per batch of 8 (the demo
engine's batch), never by time, so that the rate, measured commit to commit over a few batches, sees whole batches;
one torch thread, so that the run keeps a core to itself and the poller takes the other on a 2-core machine.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from shardgen.config import Config  # noqa: E402
from shardgen.generate.attempts import read_attempts  # noqa: E402
from shardgen.generate.checkpoint import part_files  # noqa: E402
from shardgen.layout import Layout  # noqa: E402
from shardgen.model.demo import build  # noqa: E402
from shardgen.prompts.split import split  # noqa: E402
from shardgen.prompts.stage import build_prompts  # noqa: E402
from shardgen.report import eta  # noqa: E402
from shardgen.report.status import status  # noqa: E402

MARKS = (0.1, 0.25, 0.5)


def cpu_workload(workdir: Path, prompts: int) -> Path:
    """The demo model, `prompts` counting prompts of one length and their config, prompts and split made: the
    config's path."""
    workdir.mkdir(parents=True, exist_ok=True)
    model = build(workdir / "demo-model", REPO / "config" / "demo" / "corpus.txt")
    source = workdir / "count.jsonl"
    source.write_text("".join(json.dumps({"query": f"Count from {i} to {i + 40}, one number a line."}) + "\n"
                              for i in range(1000, 1000 + prompts)))
    raw = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    raw.update(results_dir=str(workdir / "results"), shards=1, sources=[
        {"name": "count", "path": str(source), "format": "query_response"}],
        checkpoint={"every_records": 8, "every_seconds": 3600}, defaults={**raw["defaults"], "max_new_tokens": 64})
    raw["model"]["path"] = str(model)
    config = Config.from_dict(raw)
    layout = Layout(config.results)
    build_prompts(config, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    path = workdir / "eta-cpu.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def run(config_path: Path, shard: int, poll_s: float, env: dict | None = None) -> dict:
    config = Config.from_file(config_path)
    layout = Layout(config.results)
    if part_files(layout.shard_dir(shard)):
        sys.exit(f"shard {shard} already has parts: shardgen reset {shard} first")
    job = subprocess.Popen([sys.executable, "-m", "shardgen.cli", "--config", str(config.write_resolved()),
                            "generate", "--shard", str(shard), "--done", str(layout.done(shard))],
                           stdout=sys.stderr,  # its done record: this script's own output is its result
                           env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
                               filter(None, [str(REPO / "workflow"), os.environ.get("PYTHONPATH")]))})
    load_at_start = os.getloadavg()[0]  # the run's speed, and so the ETA, moves with what else the machine runs
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
        given = [p for p in polls if p[1] >= mark * total and p[2] is not None]
        if not given:  # the run ended before a poll saw this share with an ETA (a run of a few seconds)
            marks[f"{mark:.0%}"] = None
            continue
        at, committed, eta_s = given[0]
        marks[f"{mark:.0%}"] = {"at_s": round(at - started, 1), "committed_share": round(committed / total, 4),
                                "predicted_s": round(at + eta_s - started, 1),
                                "error_of_duration": round((at + eta_s - finished) / duration, 4)}
    return {"config": str(config_path), "shard": shard, "output_tokens": total, "duration_s": round(duration, 1),
            "marks": marks, "engine": config.engine.backend, "host": platform.node(), "cpu_count": os.cpu_count(),
            "load_avg_1m": {"start": round(load_at_start, 2), "end": round(os.getloadavg()[0], 2)},
            "measured_at": datetime.now(timezone.utc).isoformat()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", type=Path, help="a config whose shard is split and not yet generated")
    what.add_argument("--cpu", type=Path, metavar="WORKDIR", help="make the CPU workload here and run it")
    ap.add_argument("--prompts", type=int, default=1200, help="prompts of the CPU workload")
    ap.add_argument("--shard", type=int, default=0)
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between status polls")
    ap.add_argument("--save", type=Path, default=Path(__file__).parents[1] / "results" / "eta_accuracy.json")
    args = ap.parse_args()
    if args.cpu:
        result = run(cpu_workload(args.cpu, args.prompts), 0, args.poll, {"OMP_NUM_THREADS": "1"})
        result["prompts"] = args.prompts
    else:
        result = run(args.config, args.shard, args.poll)
    print(json.dumps(result, indent=1))
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
