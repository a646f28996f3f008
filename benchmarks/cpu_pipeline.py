"""Time prompts, split, merge (with the training export) and report on N synthetic prompts with ~256 output ids
each, no generation: parts are synthesized in the contract's schema. Each stage runs as its own `shardgen`
process, so its peak RSS is its own (wait4). Prints a table and saves benchmarks/results/cpu_pipeline.json.

    python benchmarks/cpu_pipeline.py --rows 1000000
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shardgen import tables
from shardgen.config import Config
from shardgen.demo_model import build
from shardgen.layout import Layout

REPO = Path(__file__).resolve().parent.parent
WORDS = (REPO / "config" / "demo" / "corpus.txt").read_text().split()


def write_source(path: Path, rows: int) -> None:
    rnd = random.Random(0)
    with open(path, "w") as f:
        for i in range(rows):
            words = " ".join(rnd.choices(WORDS, k=rnd.randint(10, 60)))
            f.write(json.dumps({"query": f"{i}: {words}?", "response": "ok"}) + "\n")


def synthesize_parts(layout: Layout, shards: int, out_tokens: int, per_part: int = 2000) -> int:
    rng = np.random.default_rng(0)
    t0 = datetime.now(timezone.utc)
    written = 0
    for shard in range(shards):
        table = pq.read_table(layout.split(shard), columns=["prompt_id", "gen_key", "prompt_tokens"])
        for start in range(0, table.num_rows, per_part):
            chunk = table.slice(start, per_part)
            n = chunk.num_rows
            lengths = rng.integers(out_tokens // 2, out_tokens * 3 // 2, size=n)
            flat = rng.integers(5, 2048, size=int(lengths.sum()), dtype=np.int32)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
            finished = [t0 + timedelta(milliseconds=int(x)) for x in rng.integers(0, 3_600_000, size=n)]
            part = pa.table({
                "prompt_id": chunk["prompt_id"], "gen_key": chunk["gen_key"], "shard": pa.array([shard] * n, pa.int32()),
                "attempt": pa.array([1] * n, pa.int32()), "completion": pa.array(["x " * 40] * n),
                "output_ids": ids, "finish_reason": pa.array(["length"] * n), "prompt_tokens": chunk["prompt_tokens"],
                "completion_tokens": pa.array(lengths, pa.int32()), "cached_tokens": pa.array([0] * n, pa.int32()),
                "latency_s": pa.array(rng.random(n) * 60), "submitted_at": pa.array([t0] * n, tables.UTC),
                "finished_at": pa.array(finished, tables.UTC), "gpu": pa.array([str(shard)] * n),
                "error": pa.array([None] * n, pa.string())}, schema=tables.PART)
            path = layout.shard_dir(shard) / f"part-{start // per_part:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(part, path, compression="zstd")
            written += n
    return written


def timed(stage: str, cmd: list[str], log: Path) -> dict:
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{stage} failed; see {log}:\n" + log.read_text()[-3000:])
    return {"stage": stage, "seconds": round(seconds, 1), "peak_rss_mib": round(usage.ru_maxrss / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out-tokens", type=int, default=256)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--save", type=Path, default=REPO / "benchmarks" / "results" / "cpu_pipeline.json")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="shardgen-bench-"))
    model = build(work / "model", REPO / "config" / "demo" / "corpus.txt")
    write_source(work / "source.jsonl", args.rows)
    config = Config.from_dict({
        "results_dir": str(work / "results"), "model": {"path": str(model), "context_length": 4096},
        "engine": {"backend": "transformers"}, "gpus": 0, "shards": args.shards,
        "defaults": {"max_new_tokens": args.out_tokens * 2},
        "sources": [{"name": "synthetic", "path": str(work / "source.jsonl"), "format": "query_response"}]})
    layout = Layout(config.results)
    cfg = str(config.write_resolved())
    shardgen = [sys.executable, "-m", "shardgen.cli", "--config", cfg]
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    stages = [timed("prompts", shardgen + ["prompts", "--out", str(layout.prompts_dir)], logs / "prompts.log"),
              timed("split", shardgen + ["split", "--out", str(layout.split_dir)], logs / "split.log")]
    t = time.perf_counter()
    parts_rows = synthesize_parts(layout, args.shards, args.out_tokens)
    print(f"synthesized {parts_rows} part rows in {time.perf_counter() - t:.1f}s (not a pipeline stage)")
    ds = layout.dataset_dir
    stages.append(timed("merge+export", shardgen + [
        "merge", "--dataset", str(ds / "data.parquet"), "--train", str(ds / "train.jsonl"),
        "--failed", str(layout.root / "merge" / "failed.parquet")], logs / "merge.log"))
    done = []
    for shard in range(args.shards):  # done files as generate writes them, without an engine
        from shardgen.generate import done_record

        path = layout.done(shard)
        path.write_text(json.dumps({**done_record(layout, shard), "engine": None, "gpu": "synthetic"}, default=str))
        done.append(str(path))
    stages.append(timed("report", shardgen + [
        "report", "--out", str(layout.report_dir), "--outputs", str(ds / "data.parquet"), str(ds / "train.jsonl"),
        str(layout.root / "merge" / "failed.parquet"), "--done", *done], logs / "report.log"))
    summary = json.loads((layout.report_dir / "summary.json").read_text())
    result = {"rows": args.rows, "accepted": summary["prompts_accepted"], "generated": summary["generated"],
              "out_tokens_mean": args.out_tokens, "shards": args.shards, "stages": stages,
              "dataset_mib": round((ds / "data.parquet").stat().st_size / 2**20),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    print(f"{'stage':<14}{'seconds':>10}{'peak RSS MiB':>15}")
    for s in stages:
        print(f"{s['stage']:<14}{s['seconds']:>10}{s['peak_rss_mib']:>15}")
    print(json.dumps({k: v for k, v in result.items() if k != "stages"}))
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
