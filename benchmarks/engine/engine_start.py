"""Engine start and the first-run stall, with engine.cache_dir cold or warm: one engine per call (one process).

    python benchmarks/engine/engine_start.py --config W/config.yaml --cache-dir C --label cold --out starts.json

Starts the benchmark's engine (variable_length.py's config) with its compiled-kernel caches in C, times the
start (the constructor: process spawn, weights, memory pools, kernel compiles, CUDA-graph capture), then the same
burst of generation twice: --burst prompts of the benchmark's inputs, --max-new tokens each. The first burst
carries whatever compiling is left for the first requests (the stall); the second is the same work warm.
Appends one record per call to --out.
"""

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from variable_length import prepare_inputs  # noqa: E402

from shardgen.config import Config  # noqa: E402
from shardgen.model.target import ModelInfo  # noqa: E402


def burst(engine, rows: list[dict], max_new: int) -> float:
    """The bare engine's batch call; the engine adds ignore_eos, so every output runs to max_new."""
    start = time.perf_counter()
    engine.generate_all([r["prompt_ids"] for r in rows], [{"max_new_tokens": max_new, "temperature": 0.8}] * len(rows))
    return round(time.perf_counter() - start, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--burst", type=int, default=256)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    base = Config.from_file(args.config)
    config = base.with_engine({**base.engine.as_dict(), "cache_dir": str(args.cache_dir.resolve())})
    layout = prepare_inputs(Config.from_dict({**base.raw, "results_dir": str(base.results) + "-arms"}))
    rows = pq.read_table(layout.prompts).to_pylist()[:args.burst]
    was_empty = not any(p.is_file() for p in args.cache_dir.rglob("*"))
    from shardgen.engines.session import open_engine

    t0 = time.perf_counter()
    with open_engine(config, ModelInfo.from_config(config.model), args.cache_dir.parent / f"start-{args.label}",
                     extra_sampling={"ignore_eos": True}) as engine:
        start_s = round(time.perf_counter() - t0, 1)
        first, second = burst(engine, rows, args.max_new), burst(engine, rows, args.max_new)
        version = engine.info.version
    files = {sub.name: sum(1 for p in sub.rglob("*") if p.is_file()) for sub in sorted(args.cache_dir.iterdir())}
    record = {"label": args.label, "cache_dir_was_empty": was_empty, "engine_start_s": start_s,
              "burst": {"prompts": len(rows), "max_new_tokens": args.max_new}, "first_burst_s": first,
              "second_burst_s": second, "stall_s": round(first - second, 2), "cache_files_after": files,
              "version": version, "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    saved = json.loads(args.out.read_text()) if args.out.exists() else {"starts": []}
    saved["starts"].append(record)
    args.out.write_text(json.dumps(saved, indent=1) + "\n")
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
