"""Time to a dataset: a forecast for a planned job from a measured rate, stated with its assumption.

The rate is output tokens/s per engine (a decode line's gen throughput, or a finished run's tokens over its wall
time) or a whole-run requests/s; ASSUMPTION says what the forecast takes for granted, in the engines' own words (a
GPU, or a CPU engine of a `gpus: 0` run)."""

from pathlib import Path
from statistics import median

from shardgen import ShardgenError

SECONDS_PER_HOUR = 3600
ASSUMPTION = ("The rate is output tokens/s per {engine} (a decode line's gen throughput, or a finished run's tokens "
              "over its wall time) or a whole-run requests/s. Assumed: the planned job runs at that rate throughout, "
              "which holds when its output length, prompt length and engine settings match those the rate was "
              "measured at (longer outputs mean longer contexts, more KV read per step and a lower rate), with every "
              "{engine} busy until the end.")


class ForecastError(ShardgenError, ValueError):
    pass


def rate_from_log(path: Path) -> dict:
    """Median gen throughput of the log's decode lines while requests waited (else of every decode line)."""
    from shardgen.report.diagnose import read_log
    from shardgen.report.efficiency import decode_lines

    if not path.is_file():
        raise ForecastError(f"--log {path}: no such file (give the path of an SGLang server or engine log, e.g. "
                            "tests/data/sglang-logs/nh8b-no_buffer-default.log)")
    lines = decode_lines(read_log(path).rows)
    if not lines:
        raise ForecastError(f"{path}: no SGLang decode lines to take a rate from")
    rate = median(r["gen_throughput"] for r in lines)
    running = int(median(r["running"] for r in lines))
    queued = "requests waiting" if any(r["queue"] for r in lines) else "an empty queue"
    return {"tok_per_s_per_gpu": rate, "measured": f"{path.name}: median of {len(lines)} decode lines, {running} "
                                                   f"running with {queued}: {rate:.2f} tok/s per engine"}


def rate_from_results(layout) -> dict:
    """A run's own per-shard rate (completion tokens over the shard's wall time, one engine per shard), and the
    device it was measured on (`cpu` where every committed row was generated on the CPU: the parts' `gpu`)."""
    from shardgen.store import db
    from shardgen.generate import checkpoint

    con = checkpoint.connect(layout)
    shards = [s for s in db.query(con, "per_shard") if s["wall_s"]]
    if not shards:
        raise ForecastError("no committed parts to measure a rate from: give --tok-per-s, --req-per-s or --log")
    tokens, requests = sum(s["completion_tokens"] for s in shards), sum(s["requests"] for s in shards)
    if not tokens:  # every request failed: nothing was generated to time
        raise ForecastError(f"the {requests} committed requests generated no output token: no rate to measure; give "
                            "--tok-per-s, --req-per-s or --log")
    rate = sum(s["completion_tokens"] / s["wall_s"] for s in shards) / len(shards)
    on_cpu = con.execute("SELECT bool_and(gpu = 'cpu') FROM parts").fetchall()[0][0]
    return {"tok_per_s_per_gpu": rate, "output_tokens_measured": tokens / requests,
            "device": "cpu" if on_cpu else "gpu",
            "measured": f"this run: {len(shards)} shard(s), mean {rate:.1f} output tok/s per shard at "
                        f"{tokens / requests:.0f} output tokens per request"}


def planned_prompts(layout) -> int | None:
    """The configured sources' prompt count, once `prompts` has built them."""
    import pyarrow.parquet as pq

    return pq.read_metadata(layout.prompts).num_rows if layout.prompts.exists() else None


def engines_of(config) -> tuple[int, str]:
    """(engines that run side by side, device) for a run of `config`: a CPU run (gpus: 0) runs every shard's engine
    at once, a GPU run one engine per engine.gpus_per_engine GPUs. The report's forecast and the command's alike."""
    return (config.engines, "gpu") if config.gpus else (config.n_shards, "cpu")


def forecast(prompts: int, output_tokens: float, gpus: int, tok_per_s_per_gpu: float | None = None,
             req_per_s: float | None = None, measured: str = "given on the command line", device: str = "gpu") -> dict:
    if prompts <= 0 or output_tokens <= 0 or gpus <= 0:
        raise ForecastError(f"forecast needs positive --prompts, --output-tokens and --gpus (got {prompts}, "
                            f"{output_tokens}, {gpus})")
    tokens = prompts * output_tokens
    if req_per_s:
        seconds, basis = prompts / req_per_s, f"{req_per_s} requests/s for the whole run"
    elif tok_per_s_per_gpu:
        engine = engine_words({"device": device, "gpus": gpus})[0]
        seconds = tokens / (gpus * tok_per_s_per_gpu)
        basis = f"{tok_per_s_per_gpu:.2f} output tok/s per {engine} x {gpus}"
    else:
        raise ForecastError("no rate: give --tok-per-s, --req-per-s, --log, or run it inside a run's results")
    return {"prompts": prompts, "output_tokens_per_prompt": output_tokens, "gpus": gpus, "device": device,
            "output_tokens": round(tokens), "rate": basis, "measured": measured,
            "seconds": round(seconds), "hours": round(seconds / SECONDS_PER_HOUR, 1),
            "days": round(seconds / SECONDS_PER_HOUR / 24, 2),
            "assumption": ASSUMPTION.format(engine=engine_words({"device": device, "gpus": gpus})[0])}


def from_options(args, config, layout) -> dict:
    """`shardgen forecast`: the rate from --log, --tok-per-s/--req-per-s or the run; sizes from the options, else
    the built prompt set, the run's measured output length and the config's GPUs."""
    if args.log:
        rate = rate_from_log(Path(args.log))
    elif args.tok_per_s or args.req_per_s:
        rate = {"tok_per_s_per_gpu": args.tok_per_s, "measured": "given on the command line"}
    else:
        rate = rate_from_results(layout)
    prompts = args.prompts or planned_prompts(layout)
    output_tokens = args.output_tokens or rate.get("output_tokens_measured")
    gpus, device = (args.gpus, "gpu") if args.gpus else engines_of(config) if config else (None, "gpu")
    if rate.get("device") == "cpu" and device == "gpu" and not args.req_per_s:
        raise ForecastError(f"the rate of {layout.root} was measured on a CPU engine ({rate['measured']}): it says "
                            "nothing about a GPU. Give a GPU's rate: --log (an SGLang log of the model, e.g. a pilot "
                            "run's), --tok-per-s or --req-per-s")
    if not (prompts and output_tokens and gpus):
        raise ForecastError("give --prompts, --output-tokens and --gpus (or --config for a built prompt set, a "
                            "run's measured output length and its GPU count)")
    return forecast(prompts, output_tokens, gpus, rate["tok_per_s_per_gpu"], args.req_per_s, rate["measured"], device)


def engine_words(forecast: dict) -> tuple[str, str]:
    """The engines of a report's forecast in words: ("GPU", "8 GPU(s)"), or for a CPU run ("CPU engine",
    "2 CPU engine(s)")."""
    engine = "CPU engine" if forecast.get("device") == "cpu" else "GPU"
    return engine, f"{forecast['gpus']} {engine}(s)"


def engine_rate(forecast: dict) -> float:
    """A report forecast's rate per engine: `tok_per_s_per_gpu` of a GPU run, `tok_per_s_per_cpu_engine` of a CPU
    run (whose `tok_per_s_per_gpu` is null: it measured no GPU)."""
    return forecast["tok_per_s_per_cpu_engine"] if forecast.get("device") == "cpu" else forecast["tok_per_s_per_gpu"]


def render(result: dict) -> str:
    return (f"{result['prompts']:,} prompts x {result['output_tokens_per_prompt']:,.0f} output tokens on "
            f"{engine_words(result)[1]} at {result['rate']}: {result['seconds']:,} s = {result['hours']:,} h "
            f"({result['days']} days)\n"
            f"rate: {result['measured']}\nassumption: {result['assumption']}")
