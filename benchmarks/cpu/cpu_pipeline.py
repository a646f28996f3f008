"""The CPU stages at scale. Two parts, each stage a separate `shardgen` process (peak RSS from GNU time: the largest
of the process and its workers; CPU = user + system of it and its workers):

  prompts  the prompts stage on --rows synthetic MetaMathQA-style rows, for each tokenizer (the demo's and a
           131,072-token byte-level BPE trained here on local text) and each --workers count, against its floor:
           the bare tokenizer's `encode_batch` on the same rendered texts, one thread, in the same run; plus the
           per-row cost of each change to the per-row Python, old way against new way, on the same rows.
  scale    split, merge (with the training export) and report at each --scale-rows, on a synthesized
           prompts.parquet and synthesized parts of ~256 output ids each (no generation).

    python benchmarks/cpu/cpu_pipeline.py --rows 200000 --workers 1,2 --scale-rows 1000000,4000000
    python benchmarks/cpu/cpu_pipeline.py --workers 1,4,8,16 --rows 1000000 --scale-rows 1000000,4000000  # 16 cores

Prints a table and saves benchmarks/results/cpu_pipeline.json (with os.getloadavg() before and after each run).
"""

import argparse
import glob
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from bench_data import synthesize_parts, synthesize_prompts, train_bpe, write_source

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "config" / "demo" / "corpus.txt"


def run(stage: str, cmd: list[str], log: Path, env: dict | None = None) -> dict:
    load = os.getloadavg()[0]
    rss = log.with_suffix(".rss")
    start = time.perf_counter()
    with open(log, "w") as out:
        # GNU time's child starts from time's small RSS: a child forked from this process would count this
        # process's peak (after training a tokenizer, ~1 GB) as its own; without GNU time: no RSS
        timed = ["/usr/bin/time", "-f", "%M", "-o", str(rss)] if Path("/usr/bin/time").exists() else []
        proc = subprocess.Popen([*timed, *cmd], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    failed = os.waitstatus_to_exitcode(status) != 0
    print(f"{stage}: {seconds:.1f} s", file=sys.stderr, flush=True)
    if failed:
        print(f"{stage} failed; see {log}:\n" + log.read_text()[-1500:], file=sys.stderr)
    return {"stage": stage, **({"failed": log.read_text()[-300:]} if failed else {}), "seconds": round(seconds, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(int(rss.read_text().split()[-1]) / 1024) if timed else None,
            "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def config_for(work: Path, model: Path, source: Path, shards: int, max_new: int) -> Path:
    from shardgen.config import Config

    config = Config.from_dict({
        "results_dir": str(work / "results"), "model": {"path": str(model), "context_length": 4096},
        "engine": {"backend": "transformers"}, "gpus": 0, "shards": shards, "defaults": {"max_new_tokens": max_new},
        "sources": [{"name": "synthetic", "path": str(source), "format": "query_response"}]})
    return config.write_resolved()


def shardgen(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "shardgen.cli", "--config", str(config), *args]


TOKENIZERS = {"demo": "demo (2,048)", "bpe": "bpe (131,072)"}


def bench_prompts(args, work: Path) -> Iterator[dict]:
    """One entry per tokenizer, yielded as it is measured (the caller saves each: a run cut short keeps them)."""
    from shardgen.model.demo import build
    from shardgen.prompts.pool import IN_PROCESS

    demo = build(work / "demo-model", CORPUS)
    source = write_source(work / "source.jsonl", args.rows)
    for name in args.tokenizers:
        model = demo if name == "demo" else train_bpe(work / "bpe-model", demo, 131072)
        config = config_for(work / name, model, source, 1, 512)
        entry = {"tokenizer": TOKENIZERS[name], "runs": []}
        for workers in args.workers:
            prompts_dir = work / name / f"prompts-w{workers}"
            measured = run(f"prompts w{workers}", shardgen(config, "prompts", "--out", str(prompts_dir), "--workers",
                                                           str(workers)), work / "prompts.log")
            # the stage renders an input under pool.small_input_rows() in its own process, whatever --workers says
            workers_run = 1 if IN_PROCESS in (work / "prompts.log").read_text() else workers
            entry["runs"].append({"workers": workers, "workers_run": workers_run, **measured})
        floor_json = work / "floor.json"
        # the floor and the per-change costs in one process, one thread, on the rows the stage rendered
        entry["floor_process"] = run("floor", [sys.executable, str(Path(__file__).with_name("bench_floor.py")),
                                               str(model), str(source), str(floor_json), str(args.component_rows)],
                                     work / "floor.log", env={"TOKENIZERS_PARALLELISM": "false"})
        entry.update(json.loads(floor_json.read_text()))
        first = entry["runs"][0]
        for r in entry["runs"]:
            r["rows_per_s"] = round(args.rows / r["seconds"])
            r["speedup_vs_1"] = round(first["seconds"] / r["seconds"], 2) if first["workers"] == 1 else None
            r["over_floor"] = round(r["seconds"] / entry["floor"]["encode_batch_s"], 2)  # wall / floor CPU
            r["cpu_over_floor"] = round(r["cpu_s"] / entry["floor"]["encode_batch_s"], 2)
        yield entry


def bench_scale(args, work: Path, rows: int) -> dict:
    from shardgen.generate.checkpoint import ShardCheckpoint
    from shardgen.layout import Layout

    base = work / f"scale-{rows}"
    from shardgen.model.demo import build

    model = (build(work / "demo-model", CORPUS) if not (work / "demo-model" / "config.json").exists()
             else work / "demo-model")
    config = config_for(base, model, base / "unused.jsonl", args.shards, 512)
    layout = Layout(base / "results")
    t = time.perf_counter()
    if not layout.prompts.exists():  # inputs kept in --workdir are reused
        synthesize_prompts(layout.prompts_dir, rows)
    stages = [run("split", shardgen(config, "split", "--out", str(layout.split_dir)), base / "split.log")]
    parts = glob.glob(layout.parts_glob)
    parts_rows = synthesize_parts(layout, args.shards, args.out_tokens) if not parts else "kept"
    print(f"{rows} rows: synthesized prompts and {parts_rows} part rows in {time.perf_counter() - t:.0f}s "
          "(not a pipeline stage)")
    stages.append(run("merge+export", shardgen(
        config, "merge", "--dataset", str(layout.dataset), "--train", str(layout.train),
        "--failed", str(layout.failed)), base / "merge.log"))
    done = []
    for shard in range(args.shards):  # done files as generate writes them, without an engine
        shard_checkpoint = ShardCheckpoint(layout, shard)
        with shard_checkpoint.lock():
            shard_checkpoint.finish(None, "synthetic")
        done.append(str(shard_checkpoint.done_path))
    stages.append(run("report", shardgen(
        config, "report", "--out", str(layout.report_dir), "--outputs", str(layout.dataset),
        str(layout.train), str(layout.failed), "--done", *done), base / "report.log"))
    if any("failed" in s for s in stages):
        return {"rows": rows, "stages": stages}
    summary = json.loads(layout.report.summary.read_text())
    return {"rows": rows, "generated": summary["generated"], "stages": stages,
            "dataset_mib": round(layout.dataset.stat().st_size / 2**20)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows of the prompts runs")
    ap.add_argument("--workers", type=lambda s: [int(w) for w in s.split(",")], default=[1, 2])
    ap.add_argument("--component-rows", type=int, default=50_000, help="rows of the per-change measurements")
    ap.add_argument("--scale-rows", type=lambda s: [int(r) for r in s.split(",") if r], default=[1_000_000, 4_000_000])
    ap.add_argument("--parts", choices=["prompts", "scale", "both"], default="both")
    ap.add_argument("--tokenizers", type=lambda s: s.split(","), default=list(TOKENIZERS),
                    help=f"of the prompts part, comma-separated: {','.join(TOKENIZERS)}")
    ap.add_argument("--out-tokens", type=int, default=256)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--save", type=Path, default=REPO / "benchmarks" / "results" / "cpu_pipeline.json")
    args = ap.parse_args()
    if unknown := sorted(set(args.tokenizers) - set(TOKENIZERS)):
        ap.error(f"--tokenizers: unknown {unknown}; choose from {','.join(TOKENIZERS)}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="shardgen-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    random.seed(0)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "loadavg_start": os.getloadavg(),
              "args": {k: str(v) for k, v in vars(args).items()}}
    args.save.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after each part, so a long run keeps what it measured
        result["loadavg_end"] = os.getloadavg()
        args.save.write_text(json.dumps(result, indent=1) + "\n")

    if args.parts in ("prompts", "both"):
        result["prompts"] = []
        for entry in bench_prompts(args, work):
            result["prompts"].append(entry)
            save()
    if args.parts in ("scale", "both"):
        result["scale"] = []
        for rows in args.scale_rows:
            result["scale"].append(bench_scale(args, work, rows))
            save()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
