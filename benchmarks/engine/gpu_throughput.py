"""shardgen's generate vs the bare SGLang Engine, on one GPU, and hybrid settings side by side.

    python benchmarks/engine/gpu_throughput.py compare --model /root/model/nh8b --n 1000  # (a) vs (b), alternated twice
    python benchmarks/engine/gpu_throughput.py grid --model /root/model/nh8b --n 1500 --workdir /root/grid --count 2

Same prompts (benchmarks/engine/data/prompts.jsonl, rendered with the model's chat template once), same input_ids,
fixed output length (ignore_eos), same engine. (a) is one `Engine.generate(list)` call; (b) is `run_prompts`, what
`shardgen generate` runs: the bounded async window (engine.inflight x max running requests), parts committed at the
checkpoint cadence (the defaults: 2.0, every 512 records / 60 s). Both are warmed up and timed from first submit to
last completion, without the engine start. `grid` is `shardgen tune` on these prompts, starting from
the original slow run's settings (extra_buffer, mamba_full_memory_ratio 8): a fresh engine per setting, (b) once,
ranked by steady decode tok/s (the median of the scheduler's decode lines while its queue is non-empty: window
full, before the tail); it measures --count settings per call and resumes from --workdir. Results go to --out.
"""

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from shardgen.config import Config
from shardgen.generate.driver import run_prompts, window
from shardgen.engines.session import open_engine
from shardgen.model.target import ModelInfo
from shardgen.tune.measure import metrics

PROMPTS = Path(__file__).parent / "data" / "prompts.jsonl"
BASE = {"load_format": "dummy", "attention_backend": "fa3"}
SETTINGS = {  # compare: name -> engine config (our keys; `args` passes straight to SGLang)
    "no_buffer": {"sglang": {"mamba_strategy": "no_buffer"}},
    "no_radix_512": {"sglang": {"mamba_strategy": "no_radix"}, "max_running_requests": 512},
}
TELEMETRY_KEYS = ("steady_decode_tps", "running_max", "mamba_usage_max", "kv_usage_max", "eager_decode_lines")
# the original slow run
START = {"sglang": {"mamba_strategy": "extra_buffer"}, "args": {"mamba_full_memory_ratio": 8.0}}


def bench_config(model: Path, setting: str, mem: float) -> Config:
    engine = {"backend": "sglang", "memory_share": mem, **SETTINGS[setting]}
    engine["args"] = {**BASE, **engine.get("args", {})}
    return Config.from_dict({"model": {"path": str(model)}, "engine": engine, "gpus": 1, "seed": 0,
                             "sources": [{"name": "bench", "path": str(PROMPTS), "format": "prompt"}]})


def load_prompts(model: Path, n: int, max_new: int) -> list[dict]:
    texts = [json.loads(line)["prompt"] for line in PROMPTS.read_text().splitlines()[:n]]
    ids = ModelInfo(model).encode_batch([[{"role": "user", "content": t}] for t in texts], {})
    return [{"prompt_id": f"p{i}", "gen_key": f"{i:064x}", "prompt_ids": p, "max_new_tokens": max_new,
             "temperature": 0.8, "top_p": 1.0, "top_k": -1} for i, p in enumerate(ids)]


def run_engine_list(engine, config: Config, prompts: list[dict]) -> dict:
    sampling = [{k: p[k] for k in ("max_new_tokens", "temperature", "top_p", "top_k")} for p in prompts]
    start = time.perf_counter()
    results = engine.generate_all([p["prompt_ids"] for p in prompts], sampling)
    wall = time.perf_counter() - start
    tokens = sum(len(r.output_ids) for r in results)
    return {"arm": "engine_generate_list", "wall_s": round(wall, 3), "completion_tokens": tokens,
            "output_tps": round(tokens / wall, 1)}


def run_shardgen(engine, config: Config, prompts: list[dict], workdir: Path, attempt: int) -> dict:
    start = datetime.now(timezone.utc)
    run_prompts(engine, prompts, workdir / "parts", config, shard=0, attempt=attempt, gpu="0", desc="shardgen")
    run = metrics(workdir, start)
    return {"arm": "shardgen_generate", "window": window(config, engine),
            **{k: run[k] for k in ("wall_s", "completion_tokens", "output_tps")}}


def timed(fn, engine, config, workdir, *args) -> dict:
    """One arm, with what the scheduler's telemetry saw while it ran (the same query `shardgen tune` ranks by)."""
    start = datetime.now(timezone.utc)
    result = fn(engine, config, *args)
    engine.flush_telemetry()
    seen = metrics(workdir, start, datetime.now(timezone.utc))
    return {**result, **{k: seen[k] for k in TELEMETRY_KEYS}}


def warm_up(engine, config: Config, prompts: list[dict]) -> None:
    few = [{**p, "max_new_tokens": 16} for p in prompts[:16]]
    run_engine_list(engine, config, few)
    with tempfile.TemporaryDirectory() as tmp:
        run_shardgen(engine, config, [{**p, "gen_key": "w" + p["gen_key"]} for p in few], Path(tmp), attempt=99)


def summarize(runs: list[dict], arm: str) -> dict:
    values = [r["output_tps"] for r in runs if r["arm"] == arm]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def compare(args, workdir: Path) -> dict:
    prompts = load_prompts(args.model, args.n, args.max_new)
    config = bench_config(args.model, args.setting, args.mem)
    t0 = time.perf_counter()
    with open_engine(config, ModelInfo.from_config(config.model), workdir,
                     extra_sampling={"ignore_eos": True}) as engine:
        start_s = round(time.perf_counter() - t0, 1)
        warm_up(engine, config, prompts)
        runs = []
        for repeat in range(args.repeats):
            runs.append(timed(run_engine_list, engine, config, workdir, prompts))
            runs.append(timed(run_shardgen, engine, config, workdir, prompts, workdir, repeat + 1))
            print(json.dumps(runs[-2:]), flush=True)
        a, b = summarize(runs, "engine_generate_list"), summarize(runs, "shardgen_generate")
        return {"setting": args.setting, "engine": engine.info.record, "engine_start_s": start_s, "runs": runs,
                "engine_output_tps": a, "shardgen_output_tps": b,
                "shardgen_over_engine_output_tps": round(b["median"] / a["median"], 4)}


def grid(args, workdir: Path) -> dict:
    """`shardgen tune` on the benchmark prompts, from START (the original slow run's settings): the hybrid
    settings side by side, each with a fresh engine, `--count` of them per call (it resumes)."""
    from shardgen.layout import Layout
    from shardgen.prompts.stage import build_prompts
    from shardgen.tune import tune

    engine = {"backend": "sglang", "memory_share": args.mem, **START}
    engine["args"] = {**BASE, **engine["args"]}
    config = Config.from_dict({"model": {"path": str(args.model)}, "engine": engine, "gpus": 1, "seed": 0,
                               "results_dir": str(workdir), "sources": [{"name": "bench", "path": str(PROMPTS),
                                                                          "format": "prompt"}]})
    layout = Layout(config.results)
    if not layout.prompts.exists():
        build_prompts(config, layout.prompts_dir)
    options = {"sample": args.n, "seed": 0, "max_new_tokens": args.max_new, "ignore_eos": True,
               "caps": [512, 1024], "bf16_state": True}
    return tune(config, workdir / "tune", options, args.settings.split(",") if args.settings else None, args.count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["compare", "grid"])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--mem", type=float, default=0.85)
    ap.add_argument("--setting", default="no_buffer", choices=sorted(SETTINGS))
    ap.add_argument("--settings", default=None, help="grid: measure only these tune settings, in this order")
    ap.add_argument("--count", type=int, default=2, help="grid: settings measured in this call (0 = all)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="shardgen-gpu-bench-"))
    saved = json.loads(args.out.read_text()) if args.out.exists() else {}
    meta = {"n": args.n, "max_new_tokens": args.max_new, "prompts": str(PROMPTS.name),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if args.mode == "compare":
        saved["compare"] = {**meta, **compare(args, workdir)}
        args.out.write_text(json.dumps(saved, indent=1, default=str) + "\n")
        print("shardgen_over_engine_output_tps", saved["compare"]["shardgen_over_engine_output_tps"])
        return
    summary = grid(args, workdir)
    details = [json.loads(p.read_text()) for p in sorted((workdir / "tune").glob("*/result.json"))]
    saved["grid"] = {**meta, **summary, "settings_measured": details}
    args.out.write_text(json.dumps(saved, indent=1, default=str) + "\n")
    print(json.dumps(summary["ranking"], indent=1))


if __name__ == "__main__":
    main()
