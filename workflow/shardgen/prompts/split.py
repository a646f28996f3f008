"""Stage 2: deterministic, length-balanced shards (longest-processing-time-first over expected tokens: a
conversation's whole work, every turn, and a conversation is one row so it never spans shards), streamed:
DuckDB sorts the prompts heaviest first within a memory limit (spilling to disk), and each batch of the sorted
stream is placed and appended to its shard's file, so memory does not grow with the number of prompts."""

import heapq
import shutil
from contextlib import ExitStack
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shardgen.store import db, tables
from shardgen.store.atomic import committed
from shardgen.faults import disk_full_point
from shardgen.layout import shard_file, shard_files, shard_number

BATCH_ROWS = 8192
TURNS_KEY = "shardgen.generate.turns"
BUDGET_KEY = "shardgen.output_budget"


class Balancer:
    """Each cost, in the order given (heaviest first), goes onto the shard with the least load so far (the lowest
    numbered among equals), as LPT does."""

    def __init__(self, n_shards: int):
        self.heap = [(0, s) for s in range(n_shards)]
        self.loads = [0] * n_shards

    def place(self, costs: np.ndarray) -> np.ndarray:
        shard_of = np.empty(len(costs), dtype=np.int32)
        heap = self.heap
        for i, cost in enumerate(costs.tolist()):
            load, shard = heapq.heappop(heap)
            shard_of[i] = shard
            heapq.heappush(heap, (load + cost, shard))
            self.loads[shard] = load + cost
        return shard_of


def expected_turns(path: Path) -> int:
    """The turns a shard file holds (one per turn of each conversation), from its footer; its rows if absent."""
    meta = pq.read_metadata(path)
    return int((meta.metadata or {}).get(TURNS_KEY.encode(), meta.num_rows))


def output_budget(path: Path) -> int | None:
    """The most output tokens a shard can produce (max_new_tokens over every turn), from its footer; None if absent."""
    value = (pq.read_metadata(path).metadata or {}).get(BUDGET_KEY.encode())
    return int(value) if value is not None else None


class ShardWriter:
    """One shard's file, written in row groups of about BATCH_ROWS rows."""

    def __init__(self, stack: ExitStack, path: Path):
        self.writer = stack.enter_context(pq.ParquetWriter(stack.enter_context(committed(path)), tables.PROMPTS,
                                                           compression="zstd"))
        self.pending: list[pa.Table] = []
        self.rows = 0
        self.turns = 0
        self.budget = 0

    def add(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.rows += table.num_rows
        turns = pc.list_value_length(table["turns"])
        self.turns += pc.sum(turns).as_py() or 0
        self.budget += pc.sum(pc.multiply(table["max_new_tokens"], pc.coalesce(turns, 1))).as_py() or 0
        if self.rows >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.concat_tables(self.pending), row_group_size=self.rows)
        self.pending, self.rows = [], 0

    def finish(self) -> None:
        """Flush, and record the shard's turns and output budget in the footer: status and the ETA read them
        there, not from the rows."""
        self.flush()
        self.writer.add_key_value_metadata({TURNS_KEY: str(self.turns), BUDGET_KEY: str(self.budget)})


def split(prompts_path: Path, split_dir: Path, n_shards: int, memory_limit: str = "1GB") -> list[int]:
    """Write split_dir/shard-NNN.parquet (heaviest prompts first in each, ties broken by prompt_id, so runs agree);
    return the expected tokens per shard. The files of an earlier split with more shards are removed: the split
    files are the current split (status and the report list its shards); their shards' parts stay where they are."""
    split_dir = Path(split_dir)
    spill = split_dir / ".split-spill"
    split_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"SET memory_limit = {db.quote(memory_limit)}")
    con.execute(f"SET temp_directory = {db.quote(spill)}")
    balancer = Balancer(n_shards)
    try:
        reader = con.sql(f"SELECT * FROM read_parquet({db.quote(prompts_path)}) "
                         "ORDER BY work_tokens DESC, prompt_id").to_arrow_reader(BATCH_ROWS)
        with ExitStack() as stack:
            shards = [ShardWriter(stack, shard_file(split_dir, s)) for s in range(n_shards)]
            disk_full_point()
            for batch in reader:
                batch = pa.Table.from_batches([batch]).cast(tables.PROMPTS)
                costs = batch["work_tokens"].to_numpy().astype(np.int64)
                shard_of = balancer.place(costs)
                for shard, writer in enumerate(shards):
                    writer.add(batch.filter(shard_of == shard))
            for writer in shards:
                writer.finish()
        for path in shard_files(split_dir):
            if shard_number(path) >= n_shards:
                path.unlink()
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    return balancer.loads
