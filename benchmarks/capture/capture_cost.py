"""What capture (config `capture`) costs on one GPU, and two checks of what SGLang returns, on one engine.

    python benchmarks/engine/variable_length.py make --out W --model /root/model/nh8b --engine shipped \
        --mix chat:640:256
    python benchmarks/capture/capture_cost.py --config W/config.yaml --out capture_cost.json [--ks off,0,20,64]

Arms: the same rendered prompts through SGLang's own batch call (`Engine.generate(list)`, `ignore_eos`, so every arm
generates the same tokens' count), without capture (`off`) and with the capture arguments shardgen sends
(`capture_args` of engines/sglang/results.py) at each k, in the order given and then reversed (two runs per arm; the
engine is warm before the first: a 64-prompt warm-up). The arms repeat the same prompts, so they compare like with like
only without a prefix cache (single-turn work: `auto` resolves to `no_radix`); the engine's settings are in the output.
Per arm: output tokens/s (wall from submit to the last completion),
the host-side conversion to Results (`result_of`), and per million generated tokens: the Python memory of what
SGLang hands back (the logprob fields of meta_info), and the Parquet bytes of the part columns and of the
`exports/turns.topk.parquet` sidecar (tables.PART's and tables.TOPK_SIDECAR's types, zstd as the workflow writes).

Checks (same engine, greedy, a few prompts):
  stop_token: a request that stops on a stop token (the token its greedy run produced at step 10, made a stop id):
    does SGLang give a logprob for the stop token, and is it in output_ids?
  rescore: generated tokens scored again in a prefill (`max_new_tokens` 1, `logprob_start_len` = prompt - 1,
    `input_token_logprobs`), at the generation's temperature and at 1: how the prefill's entries line up with the
    output tokens, and how far their logprobs are from the ones returned while generating (what `shardgen audit`'s
    own-settings row rests on).
"""

import argparse
import json
import math
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))  # variable_length: the workload's inputs
from variable_length import prepare_inputs  # noqa: E402

from shardgen.store import tables  # noqa: E402
from shardgen.capture import Capture  # noqa: E402
from shardgen.config import Config  # noqa: E402
from shardgen.engines.sglang.results import capture_args, result_of  # noqa: E402
from shardgen.layout import Layout  # noqa: E402

LOGPROB_KEYS = ("output_token_logprobs", "output_top_logprobs")


def deep_size(obj, seen: set | None = None) -> int:
    """Bytes of a structure of lists, tuples, dicts and scalars, each object counted once (what pympler's asizeof
    does for these types)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        size += sum(deep_size(v, seen) for v in obj)
    return size


def parquet_bytes(table: pa.Table) -> int:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().size


def stored_bytes(results: list) -> dict:
    """The capture's Parquet bytes: as part columns (float32) and as the sidecar (float16)."""
    part = pa.table({"token_logprobs": pa.array([r.logprobs for r in results], tables.TOKEN_LOGPROBS),
                     "top_ids": pa.array([r.top_ids for r in results], tables.TOP_IDS),
                     "top_logprobs": pa.array([r.top_logprobs for r in results], tables.TOP_LOGPROBS)})
    sidecar = pa.table({"id": pa.array([str(i) for i in range(len(results))], pa.string()),
                        "logprobs": pa.array([r.logprobs for r in results], tables.TOPK_SIDECAR.field("logprobs").type),
                        "top_ids": pa.array([r.top_ids for r in results], tables.TOP_IDS),
                        "top_logprobs": pa.array([r.top_logprobs for r in results],
                                                 tables.TOPK_SIDECAR.field("top_logprobs").type)})
    return {"part_columns": parquet_bytes(part), "sidecar": parquet_bytes(sidecar)}


def run_arm(engine, rows: list[dict], name: str) -> dict:
    k = None if name == "off" else int(name)
    extra = capture_args(Capture(k)) if k is not None else {}
    sampling = [{key: r[key] for key in ("max_new_tokens", "temperature", "top_p") if r[key] is not None}
                | {"ignore_eos": True} for r in rows]
    start = time.perf_counter()
    outs = engine.engine.generate(input_ids=[r["prompt_ids"] for r in rows], sampling_params=sampling, **extra)
    wall = time.perf_counter() - start
    start = time.perf_counter()
    results = [result_of(out) for out in outs]
    convert = time.perf_counter() - start
    tokens = sum(len(r.output_ids) for r in results)
    per_million = 1e6 / tokens
    arm = {"arm": name, "requests": len(rows), "completion_tokens": tokens, "wall_s": round(wall, 2),
           "output_tps": round(tokens / wall, 1), "result_of_s": round(convert, 3)}
    if k is not None:
        returned = deep_size([{key: out["meta_info"].get(key) for key in LOGPROB_KEYS} for out in outs])
        kept = deep_size([(r.logprobs, r.top_ids, r.top_logprobs) for r in results])
        arm["per_million_tokens"] = {
            "host_returned_mb": round(returned * per_million / 1e6, 1),
            "host_results_mb": round(kept * per_million / 1e6, 1),
            **{f"{what}_mb": round(size * per_million / 1e6, 1) for what, size in stored_bytes(results).items()}}
        arm["logprobs_per_output_token"] = round(sum(len(r.logprobs or ()) for r in results) / tokens, 4)
    print(json.dumps(arm), flush=True)
    return arm


def stop_token_check(engine, rows: list[dict]) -> list[dict]:
    """A greedy request made to stop on the token it produced at step 10: what SGLang returns for that token."""
    prompts = [r["prompt_ids"] for r in rows[:8]]
    first = engine.engine.generate(input_ids=prompts, sampling_params={"max_new_tokens": 32, "temperature": 0,
                                                                       "ignore_eos": True})
    stops = [out["output_ids"][10] for out in first]
    again = engine.engine.generate(
        input_ids=prompts, sampling_params=[{"max_new_tokens": 32, "temperature": 0, "stop_token_ids": [s]}
                                            for s in stops], **capture_args(Capture(5)))
    checks = []
    for before, out, stop in zip(first, again, stops):
        meta = out["meta_info"]
        chosen = meta.get("output_token_logprobs") or []
        steps = before["output_ids"].index(stop) + 1  # tokens up to and including the stop token
        checks.append({"stop_id": stop, "finish_reason": meta.get("finish_reason"), "tokens_to_stop": steps,
                       "output_ids": len(out["output_ids"]), "stop_in_output_ids": stop in out["output_ids"],
                       "logprob_entries": len(chosen), "last_entry_id": chosen[-1][1] if chosen else None,
                       "result_output_ids": len(result_of(out).output_ids)})
    return checks


def rescore_check(engine, rows: list[dict], temperature: float) -> dict:
    """Generated tokens scored again by a prefill: how its input logprobs line up, and their distance."""
    prompts = [r["prompt_ids"] for r in rows[:16]]
    made = engine.engine.generate(input_ids=prompts, sampling_params={"max_new_tokens": 48,
                                                                      "temperature": temperature,
                                                                      "ignore_eos": True},
                                  **capture_args(Capture(1)))
    found = {}
    for scoring_temperature in sorted({temperature, 1.0}):
        scored = engine.engine.generate(
            input_ids=[p + out["output_ids"] for p, out in zip(prompts, made)],
            sampling_params={"max_new_tokens": 1, "temperature": scoring_temperature},
            return_logprob=True, logprob_start_len=[len(p) - 1 for p in prompts], top_logprobs_num=1)
        shapes, diffs = set(), []
        for prompt, out, score in zip(prompts, made, scored):
            entries = score["meta_info"].get("input_token_logprobs") or []
            target = out["output_ids"]
            shapes.add((len(entries) - len(target), entries[0][1] == target[0] if entries else None,
                        entries[0][0] is None if entries else None))
            tail = entries[-len(target):]
            if [e[1] for e in tail] == target:
                diffs += [abs(e[0] - g[0]) for e, g in zip(tail, out["meta_info"]["output_token_logprobs"])
                          if e[0] is not None and g[0] is not None]
        diffs.sort()
        found[f"scored_at_T{scoring_temperature}"] = {
            "entries_minus_outputs_first_matches_first_is_none": sorted(map(list, shapes)),
            "tokens_compared": len(diffs),
            "abs_diff_mean": round(statistics.fmean(diffs), 6) if diffs else None,
            "abs_diff_p99": round(diffs[min(len(diffs) - 1, math.ceil(0.99 * len(diffs)) - 1)], 6) if diffs else None,
            "abs_diff_max": round(diffs[-1], 6) if diffs else None}
    return {"generated_at_T": temperature, **found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ks", default="off,0,20,64", help="arms: off and capture's top_k values, in this order")
    args = ap.parse_args()
    from shardgen.engines.session import open_engine

    config = Config.from_file(args.config)
    bench = Layout(Path(str(config.results) + "-capture"))
    layout = prepare_inputs(Config.from_dict({**config.raw, "results_dir": str(bench.root)}))
    rows = pq.read_table(layout.split(0)).to_pylist()
    order = args.ks.split(",")
    result: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "order": order + order[::-1],
                    "arms": []}

    def save() -> None:
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")

    t0 = time.perf_counter()
    with open_engine(config, config.target_model, bench.root / "engine", work=rows) as engine:
        result["engine_start_s"] = round(time.perf_counter() - t0, 1)
        result["engine"] = engine.info.record
        run_arm(engine, [{**r, "max_new_tokens": 16} for r in rows[:64]], "off")  # warm-up, not kept
        for name in result["order"]:
            result["arms"].append(run_arm(engine, rows, name))
            save()
        by_arm: dict[str, list[float]] = {}
        for arm in result["arms"]:
            by_arm.setdefault(arm["arm"], []).append(arm["output_tps"])
        base = statistics.fmean(by_arm["off"]) if "off" in by_arm else None
        result["output_tps_mean"] = {name: round(statistics.fmean(v), 1) for name, v in by_arm.items()}
        if base:
            result["over_off"] = {name: round(statistics.fmean(v) / base, 4) for name, v in by_arm.items()}
        save()
        result["stop_token"] = stop_token_check(engine, rows)
        save()
        result["rescore"] = rescore_check(engine, rows, rows[0]["temperature"] or 1.0)
        save()
    print(json.dumps({k: result.get(k) for k in ("output_tps_mean", "over_off")}))


if __name__ == "__main__":
    main()
