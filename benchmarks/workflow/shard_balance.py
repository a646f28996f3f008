"""8-GPU shard balance on paper: replay the one-GPU run's requests over 8 shards and predict each shard's finish.

    python benchmarks/workflow/shard_balance.py --run benchmarks/results/2026-12-03-h200-variable-length.json

Each request's decode time is its completion tokens at the run's median step rate (one token per running request
per step, as the scheduler's decode lines give it); shards come from shardgen's own split (heaviest first onto the
lightest shard, cost = prompt tokens + output tokens: with dummy weights every output ran to its limit, so this is
the limit the split sees); inside a shard, requests take the engine's slots (max_running_requests) in split order.
The prediction ignores prefill and that steps get faster as a shard's batch empties. Two workloads: the run's
requests as they are, and the run resampled x8 (each shard then holds about what the one GPU ran). Goal: the
slowest shard within 5% of the mean.
"""

import argparse
import heapq
import json
import statistics
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from shardgen.prompts.split import Balancer


def shard_finish(decode_s: list[float], slots: int) -> float:
    free = [0.0] * slots
    for d in decode_s:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def assign(costs: np.ndarray, ids: list[str], shards: int) -> tuple[np.ndarray, list[int]]:
    """Each request's shard as split gives it (heaviest first, ties by id, onto the least loaded shard), and the
    split order."""
    order = sorted(range(len(ids)), key=lambda i: (-int(costs[i]), ids[i]))
    shard_of = np.empty(len(ids), dtype=np.int32)
    shard_of[order] = Balancer(shards).place(costs[order])
    return shard_of, order


def predict(prompt_tokens: np.ndarray, output_tokens: np.ndarray, step_rate: float, shards: int, slots: int) -> dict:
    ids = [f"{i:08d}" for i in range(len(prompt_tokens))]
    shard_of, order = assign(prompt_tokens + output_tokens, ids, shards)
    finishes = [shard_finish([output_tokens[i] / step_rate for i in order if shard_of[i] == s], slots)
                for s in range(shards)]
    mean = statistics.mean(finishes)
    return {"requests": len(ids), "finish_s": [round(f, 1) for f in finishes], "mean_s": round(mean, 1),
            "slowest_over_mean": round(max(finishes) / mean, 4), "fastest_over_mean": round(min(finishes) / mean, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    run = json.loads(args.run.read_text())
    requests = pq.read_table(args.run.with_suffix(".requests.parquet"))
    prompt = requests["prompt_tokens"].to_numpy().astype(np.int64)
    output = requests["completion_tokens"].to_numpy().astype(np.int64)
    b = run["arms"]["b"]
    rate, slots = b["median_step_rate"], run["engine"]["max_running_requests"]
    pick = np.random.default_rng(args.seed).integers(0, len(prompt), len(prompt) * args.shards)
    result = {"source": args.run.name, "step_rate": rate, "slots_per_shard": slots, "shards": args.shards,
              "as_run": predict(prompt, output, rate, args.shards, slots),
              "resampled_x8": predict(prompt[pick], output[pick], rate, args.shards, slots), "goal": 1.05}
    out = args.out or args.run.with_name(args.run.stem + "-shard-balance.json")
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {x: y for x, y in v.items() if x != "finish_s"} if isinstance(v, dict) else v
                      for k, v in result.items()}))


if __name__ == "__main__":
    main()
