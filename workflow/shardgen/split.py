"""Stage 2: deterministic, length-balanced shards (longest-processing-time-first over expected tokens)."""

import heapq
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shardgen.atomic import write_table


def shard_path(split_dir: Path, shard: int) -> Path:
    return Path(split_dir) / f"shard-{shard:03d}.parquet"


def assign(costs: np.ndarray, ids: list[str], n_shards: int) -> tuple[np.ndarray, np.ndarray]:
    """Shard of each row and the order rows were placed in: heaviest first onto the lightest shard; ties broken by
    prompt_id, so runs agree."""
    order = sorted(range(len(costs)), key=lambda i: (-int(costs[i]), ids[i]))
    heap = [(0, s) for s in range(n_shards)]
    shard_of = np.empty(len(costs), dtype=np.int32)
    for i in order:
        load, shard = heapq.heappop(heap)
        shard_of[i] = shard
        heapq.heappush(heap, (load + int(costs[i]), shard))
    return shard_of, np.array(order, dtype=np.int64)


def split(prompts_path: Path, split_dir: Path, n_shards: int) -> list[int]:
    """Write split_dir/shard-NNN.parquet (heaviest prompts first in each); return the expected tokens per shard."""
    table = pq.read_table(prompts_path)
    costs = pc.add(table["prompt_tokens"], table["max_new_tokens"]).to_numpy(zero_copy_only=False)
    shard_of, order = assign(costs, table["prompt_id"].to_pylist(), n_shards)
    table = table.take(order)
    shard_of = shard_of[order]
    loads = []
    for shard in range(n_shards):
        part = table.filter(shard_of == shard)
        write_table(part, shard_path(split_dir, shard))
        loads.append(int(pc.sum(pc.add(part["prompt_tokens"], part["max_new_tokens"])).as_py() or 0))
    return loads
