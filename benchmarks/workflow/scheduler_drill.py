"""Fault drill on the real engine: kill -9 SGLang's scheduler in the middle of a shard, while the workflow runs.

    python benchmarks/workflow/scheduler_drill.py --config W/config.yaml --out drill.json [--cores 16]

Derives its own config from the benchmark's (variable_length.py make): results in a folder of its own, at most
--limit rows per source, --max-new tokens each, a part every 64 records, the same engine and cache_dir. Runs
`snakemake --cores N --resources gpu=1` on the config (its profile's `retries` restart the shard), waits
until the shard has committed parts, SIGKILLs the process whose command line holds --match (SGLang names its
scheduler `sglang::scheduler...`), samples `shardgen status` (each shard's state: generating, down:CAUSE, ...)
every --every seconds until the workflow ends, then counts the dataset's rows and distinct prompt_ids against the
prompts, and the attempts the shard logged.
"""

import argparse
import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import yaml
from shardgen.report import eta
from shardgen.generate.attempts import read_attempts
from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.generate.checkpoint import part_files
from shardgen.report.status import status


def _parent(pid: str) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def find_pids(root: int, match: str) -> list[int]:
    """Descendants of `root` whose command line holds `match`."""
    parents, cmdlines = {}, {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = _parent(proc.name)
                cmdlines[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, ValueError):
                continue

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == root:
                return True
        return False

    return sorted(pid for pid, cmd in cmdlines.items() if match in cmd and descends(pid))


def sample(layout: Layout, t0: float, label: str) -> dict:
    """What `shardgen status` shows now: each shard's state and figures, and the run's ETA line."""
    rows = status(layout) if layout.split_dir.exists() else []
    run = eta.annotate(layout, rows) if rows else {}
    return {"t_s": round(time.monotonic() - t0, 1), "phase": label, "run_eta_s": run.get("eta_s"),
            "down": run.get("down"),
            "shards": [{k: r.get(k) for k in ("state", "silent_s", "committed", "prompts", "done", "commit_tok_per_s",
                                              "eta_s", "running", "out_tok_per_s")} for r in rows]}


def derive(config_path: Path, limit: int, max_new: int) -> Path:
    raw = yaml.safe_load(config_path.read_text())
    cache = Path(raw["results_dir"]) / raw["engine"].get("cache_dir", "engine-cache")
    raw.update(results_dir=raw["results_dir"] + "-drill", checkpoint={"every_records": 64, "every_seconds": 10})
    raw["engine"] = {**raw["engine"], "cache_dir": str(cache)}
    for source in raw["sources"]:
        source.update(limit=limit, sampling={"max_new_tokens": max_new})
    path = config_path.with_name("drill.yaml")
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def drill(config_path: Path, cores: int, match: str, every: float, log: Path) -> dict:
    layout = Layout(Config.from_file(config_path).results)
    t0 = time.monotonic()
    with open(log, "w") as out:
        workflow = subprocess.Popen(["snakemake", "--cores", str(cores), "--resources", "gpu=1", "--configfile",
                                     str(config_path)], stdout=out, stderr=subprocess.STDOUT)
    samples, killed = [], None
    while workflow.poll() is None:
        if killed is None and part_files(layout.shard_dir(0)) and (pids := find_pids(workflow.pid, match)):
            os.kill(pids[0], signal.SIGKILL)
            killed = {"t_s": round(time.monotonic() - t0, 1), "pid": pids[0], "matched": len(pids),
                      "parts_before": len(part_files(layout.shard_dir(0)))}
            samples.append(sample(layout, t0, "killed"))
        elif killed:
            samples.append(sample(layout, t0, "after_kill"))
        time.sleep(every)
    con = duckdb.connect()
    dataset = str(layout.dataset_dir / "*.parquet")
    rows, distinct = con.execute(
        f"SELECT count(*), count(DISTINCT prompt_id) FROM read_parquet('{dataset}')").fetchall()[0]
    parts_rows, parts_distinct = con.execute(
        f"SELECT count(*), count(DISTINCT prompt_id) FROM read_parquet('{layout.parts_glob}')").fetchall()[0]
    prompts = con.execute(f"SELECT count(*) FROM read_parquet('{layout.prompts}')").fetchall()[0][0]
    return {"date": datetime.now(UTC).isoformat(timespec="seconds"), "workflow_rc": workflow.returncode,
            "wall_s": round(time.monotonic() - t0, 1), "killed": killed, "prompts": prompts,
            "dataset_rows": rows, "dataset_distinct_prompt_ids": distinct, "parts_rows": parts_rows,
            "parts_distinct_prompt_ids": parts_distinct, "attempts": read_attempts(layout.shard_dir(0)),
            "status_samples": samples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--match", default="sglang::scheduler")
    ap.add_argument("--every", type=float, default=3.0)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--max-new", type=int, default=256)
    args = ap.parse_args()
    result = drill(derive(args.config, args.limit, args.max_new), args.cores, args.match, args.every,
                   args.out.with_suffix(".snakemake.log"))
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("status_samples", "attempts")}, default=str))


if __name__ == "__main__":
    main()
