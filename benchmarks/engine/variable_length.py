"""Variable-length work on one GPU: the bare SGLang Engine in the dataset's order (a) and in shardgen's order (a'),
against the real workflow (b), on the same rendered input_ids and per-prompt limits.

    python benchmarks/engine/variable_length.py make --out W --model /root/model/nh8b       # 4 sources + W/config.yaml
    python benchmarks/engine/variable_length.py arms --config W/config.yaml --out arms.json   # (a) and (a'), one engine
    snakemake --cores 16 --resources gpu=1 --configfile W/config.yaml                   # (b)
    python benchmarks/engine/variable_length.py collect --config W/config.yaml --arms arms.json --wall S --out X.json
    python benchmarks/engine/variable_length.py own --config W/config.yaml --out own.json   # (c): SGLang's own sizing

`make` writes four seeded sources shaped like the production mix: many short chat answers (256 new tokens), fewer
code answers (768), web answers (1,536) and reasoning traces (3,072), prompts long-tailed (log-normal words,
20 to ~2,000 tokens). The config lists them in config/config.yaml's order (reasoning first); (a) is the prompts
stage's order (sources in config order, rows in file order), (a') the split's order (heaviest first), (b) reads
the same prompts.parquet. With dummy weights a stop token is almost never sampled: outputs run to their limit.
(c) is SGLang's Engine.generate(list) over (a')'s rows with SGLang's own defaults: only the model, dummy weights,
the attention backend and the seed given (its own prefix-cache strategy, running cap and pool split), the same
sampling and logprob request as (a'); a 16-request warm-up first. Arms are timed from first submit to last
completion; the engine start is apart. The makespan floor is the longest
request's decode steps at the arm's median step rate (decode lines' tokens/s over running requests).
"""

import argparse
import json
import random
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import yaml

from shardgen.store import db, tables
from shardgen.config import Config
from shardgen.layout import ATTEMPTS, Layout, parts_glob, telemetry_glob
from shardgen.model.target import ModelInfo

SOURCES = [  # name, rows, max_new_tokens: config/config.yaml's order
    ("reasoning", 30, 3072), ("web", 60, 1536), ("code", 200, 768), ("chat", 2400, 256)]
ENGINE = {"backend": "sglang", "memory_share": 0.85, "sglang": {"mamba_strategy": "no_radix"},
          "max_running_requests": 256,
          "args": {"load_format": "dummy", "attention_backend": "fa3", "mamba_ssm_dtype": "bfloat16"}}
# `make --engine shipped`: the shipped defaults (the schema's engine section), with only what dummy weights need.
SHIPPED = {"backend": "sglang", "args": {"load_format": "dummy", "attention_backend": "fa3"}}
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "en", "qua", "dor", "pel", "ix", "ur", "sa", "be"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(n))


def make(out: Path, model: str, seed: int, scale: float, limit_cap: int | None = None,
         checkpoint_seconds: float | None = None, engine: str = "fixed", mix: list | None = None) -> Path:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    sources = []
    for name, rows, limit in mix or SOURCES:
        limit = min(limit, limit_cap or limit)
        with open(out / f"{name}.jsonl", "w") as f:
            for i in range(max(1, round(rows * scale))):
                words = min(900, max(8, int(rng.lognormvariate(4.0, 0.9))))  # median ~55 words, tail to 900
                f.write(json.dumps({"prompt": f"[{name} {i}] " + _words(rng, words)}) + "\n")
        sources.append({"name": name, "path": str((out / f"{name}.jsonl").resolve()), "format": "prompt",
                        "sampling": {"max_new_tokens": limit}})
    config = {"results_dir": str((out / "results").resolve()), "model": {"path": model},
              "engine": SHIPPED if engine == "shipped" else ENGINE, "gpus": 1,
              "shards": 1, "defaults": {"temperature": 0.8, "top_p": 1.0}, "seed": seed, "sources": sources}
    if checkpoint_seconds:
        config["checkpoint"] = {"every_seconds": checkpoint_seconds}
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return out / "config.yaml"


def _telemetry(shard_dir: Path, since: datetime, until: datetime) -> dict:
    con = duckdb.connect()
    db.parquet_view(con, "telemetry", telemetry_glob(shard_dir), tables.TELEMETRY)
    rows = con.execute("SELECT epoch(ts - $since::TIMESTAMPTZ), running, gen_throughput, queue FROM telemetry "
                       "WHERE kind = 'decode' AND ts BETWEEN $since AND $until ORDER BY ts",
                       {"since": since, "until": until}).fetchall()
    steps = [tps / running for _, running, tps, _ in rows if running]
    steady = [tps for _, _, tps, queue in rows if queue > 0]
    return {"running_series": [[round(t, 2), r] for t, r, _, _ in rows],
            "median_step_rate": round(statistics.median(steps), 2) if steps else None,
            "steady_decode_tps": round(statistics.median(steady), 1) if steady else None,
            "running_max": max((r for _, r, _, _ in rows), default=None)}


def _with_floor(arm: dict, longest: int) -> dict:
    rate = arm["median_step_rate"]
    floor = round(longest / rate, 2) if rate else None
    return {**arm, "longest_request_tokens": longest, "makespan_floor_s": floor,
            "makespan_over_floor": round(arm["wall_s"] / floor, 3) if floor else None}


def run_arm(engine, rows: list[dict], name: str, shard_dir: Path) -> dict:
    """The bare engine's own batch call (Engine.generate(list)) over `rows`, in their order."""
    sampling = [{k: r[k] for k in ("max_new_tokens", "temperature", "top_p", "top_k")} for r in rows]
    since = datetime.now(timezone.utc)
    start = time.perf_counter()
    results = engine.generate_all([r["prompt_ids"] for r in rows], sampling)
    wall = time.perf_counter() - start
    engine.flush_telemetry()
    tokens = [len(r.output_ids) for r in results]
    arm = {"arm": name, "requests": len(rows), "wall_s": round(wall, 2), "completion_tokens": sum(tokens),
           "output_tps": round(sum(tokens) / wall, 1),
           **_telemetry(shard_dir, since, datetime.now(timezone.utc))}
    print(json.dumps({k: v for k, v in arm.items() if k != "running_series"}), flush=True)
    return _with_floor(arm, max(tokens))


def prepare_inputs(config: Config) -> Layout:
    """The workflow's own prompts and split stages, run once: every arm reads these input_ids."""
    from shardgen.prompts.stage import build_prompts
    from shardgen.prompts.split import split

    layout = Layout(config.results)
    if not layout.split(0).exists():
        build_prompts(config, layout.prompts_dir)
        split(layout.prompts, layout.split_dir, 1)
    return layout


def arms(config_path: Path, out: Path, order: list[str]) -> None:
    from shardgen.engines.session import open_engine

    config = Config.from_file(config_path)
    bench = Layout(Path(str(config.results) + "-arms"))
    layout = prepare_inputs(Config.from_dict({**config.raw, "results_dir": str(bench.root)}))
    by_order = {"a": pq.read_table(layout.prompts).to_pylist(), "a_prime": pq.read_table(layout.split(0)).to_pylist()}
    t0 = time.perf_counter()
    # The work goes with the start, as generate gives it: `mamba_strategy: auto` resolves from it.
    with open_engine(config, ModelInfo.from_config(config.model), bench.root / "engine",
                     work=by_order["a_prime"]) as engine:
        result = {"engine_start_s": round(time.perf_counter() - t0, 1), "arms": {}}
        run_arm(engine, [{**r, "max_new_tokens": 16} for r in by_order["a"][:64]], "warm-up", bench.root / "engine")
        for name in order:
            result["arms"][name] = run_arm(engine, by_order[name], name, bench.root / "engine")
            out.write_text(json.dumps({**result, "engine": engine.info.record}, indent=1, default=str) + "\n")


def own(config_path: Path, out: Path) -> dict:
    """(c): the rows of (a') through a bare sglang.Engine sized by SGLang itself."""
    import sglang

    config = Config.from_file(config_path)
    layout = Layout(Path(str(config.results) + "-arms"))
    rows = pq.read_table(layout.split(0)).to_pylist()
    model = ModelInfo.from_config(config.model)
    given = {k: config.engine.args[k] for k in ("load_format", "attention_backend") if k in config.engine.args}
    t0 = time.perf_counter()
    engine = sglang.Engine(model_path=str(model.path), random_seed=config.seed, log_level="info", **given)
    started = round(time.perf_counter() - t0, 1)
    try:
        def params(r: dict, limit: int) -> dict:
            return {"max_new_tokens": limit, "temperature": r["temperature"], "top_p": r["top_p"],
                    "top_k": r["top_k"], "stop_token_ids": model.stop_token_ids}
        warm = rows[:16]
        engine.generate(input_ids=[r["prompt_ids"] for r in warm], sampling_params=[params(r, 16) for r in warm])
        start = time.perf_counter()
        outs = engine.generate(input_ids=[r["prompt_ids"] for r in rows],
                               sampling_params=[params(r, r["max_new_tokens"]) for r in rows],
                               return_logprob=True, logprob_start_len=-1)
        wall = time.perf_counter() - start
        server = engine.get_server_info()
    finally:
        engine.shutdown()
    tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
    result = {"arm": "c_sglang_own", "requests": len(rows), "engine_start_s": started, "wall_s": round(wall, 2),
              "completion_tokens": tokens, "output_tps": round(tokens / wall, 1),
              "server_args": given, "max_running_requests": server.get("max_running_requests"),
              "internal_states": server.get("internal_states"),
              "resolved": {k: server.get(k) for k in ("disable_radix_cache", "mamba_radix_cache_strategy",
                                                     "max_mamba_cache_size", "mem_fraction_static",
                                                     "cuda_graph_max_bs", "disable_overlap_schedule")}}
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({k: result[k] for k in ("wall_s", "output_tps", "max_running_requests")}), flush=True)
    return result


def workflow_run(shard_dir: Path) -> dict:
    """A workflow shard's generation from its own files: first submit to last completion, completion tokens, the
    longest answer, and the engine start (attempt start to engine_started) with the moment the engine was up."""
    parts = duckdb.sql(f"SELECT * FROM read_parquet('{parts_glob(shard_dir)}')")
    first, last, tokens, longest, n = parts.aggregate(
        "min(submitted_at), max(finished_at), sum(completion_tokens), max(completion_tokens), count(*)").fetchall()[0]
    wall = (last - first).total_seconds()
    events = [json.loads(x) for x in (shard_dir / ATTEMPTS).read_text().splitlines()]
    started = next(datetime.fromisoformat(e["started_at"]) for e in events if "started_at" in e)
    ready = next(datetime.fromisoformat(e["at"]) for e in events if e.get("event") == "engine_started")
    return {"requests": n, "wall_s": round(wall, 2), "completion_tokens": int(tokens),
            "output_tps": round(tokens / wall, 1), "engine_start_s": round((ready - started).total_seconds(), 1),
            "first": first, "last": last, "longest": int(longest), "ready": ready}


def collect(config_path: Path, arms_path: Path, workflow_wall: float, out: Path) -> dict:
    """(b)'s figures from the workflow's own files, beside (a) and (a'), and the ratios the issue names."""
    config = Config.from_file(config_path)
    layout = Layout(config.results)
    shard_dir = layout.shard_dir(0)
    run = workflow_run(shard_dir)
    b = _with_floor({"arm": "b", **{k: v for k, v in run.items() if k not in ("first", "last", "longest", "ready")},
                     "workflow_wall_s": round(workflow_wall, 1), **_telemetry(shard_dir, run["first"], run["last"])},
                    run["longest"])
    saved = json.loads(arms_path.read_text())
    a, a_prime = saved["arms"].get("a"), saved["arms"]["a_prime"]
    done = json.loads(layout.done(0).read_text())
    result = {"workload": "variable_length", "sglang_version": done["engine"]["version"],
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "sources": [{"name": s["name"], "rows": sum(1 for _ in open(s["path"])),
                           "max_new_tokens": s["sampling"]["max_new_tokens"]} for s in config.raw["sources"]],
              "engine_config": config.engine.as_dict(),
              "shardgen_over_engine_output_tps": round(b["output_tps"] / a_prime["output_tps"], 4),
              "shardgen_over_dataset_order_output_tps": round(b["output_tps"] / a["output_tps"], 4) if a else None,
              "arms": {"a": a, "a_prime": a_prime, "b": b}, "arms_engine_start_s": saved["engine_start_s"],
              "engine": done["engine"]}
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    duckdb.sql(f"SELECT prompt_tokens, completion_tokens, latency_s, submitted_at, finished_at "
               f"FROM read_parquet('{parts_glob(shard_dir)}')").write_parquet(
        str(out.with_suffix(".requests.parquet")))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["make", "arms", "collect", "own"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="/root/model/nh8b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="make: rows per source x this")
    ap.add_argument("--limit-cap", type=int, help="make: no source's max_new_tokens above this")
    ap.add_argument("--checkpoint-seconds", type=float, help="make: commit a part at least this often")
    ap.add_argument("--engine", choices=["fixed", "shipped"], default="fixed",
                    help="make: the fixed settings above, or the shipped defaults (mamba_strategy auto)")
    ap.add_argument("--mix", help="make: sources as name:rows:max_new_tokens,... (default: SOURCES)")
    ap.add_argument("--config", type=Path)
    ap.add_argument("--order", default="a,a_prime", help="arms: which, in this order")
    ap.add_argument("--arms", type=Path, help="collect: the arms' JSON")
    ap.add_argument("--wall", type=float, default=0.0, help="collect: the whole workflow's wall seconds")
    args = ap.parse_args()
    if args.mode == "make":
        mix = [(name, int(rows), int(limit)) for name, rows, limit in
               (item.split(":") for item in args.mix.split(","))] if args.mix else None
        print(make(args.out, args.model, args.seed, args.scale, args.limit_cap, args.checkpoint_seconds, args.engine,
                   mix))
    elif args.mode == "arms":
        arms(args.config, args.out, args.order.split(","))
    elif args.mode == "own":
        own(args.config, args.out)
    else:
        result = collect(args.config, args.arms, args.wall, args.out)
        print(json.dumps({k: result[k] for k in ("shardgen_over_engine_output_tps",
                                                  "shardgen_over_dataset_order_output_tps")}))


if __name__ == "__main__":
    main()
