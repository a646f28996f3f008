"""Stage 1: read every source, normalize to chat messages, tokenize once, dedupe, reject (never truncate).
Workers process fixed chunks of rows; this process reads, dedupes in source order and writes, so the output is
the same (byte for byte) whatever the number of workers."""

import os
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from shardgen.store import tables
from shardgen.store.atomic import committed, write_table
from shardgen.config import Config
from shardgen.layout import prompt_table
from shardgen.prompts.pool import chunk_results, workers_to_start
from shardgen.prompts.rows import ChunkResult
from shardgen.prompts.sources import open_source

ROW_GROUP_ROWS = 16384


@dataclass
class SourceTally:
    rows_read: int = 0
    rejected: int = 0
    duplicates: int = 0
    system_replaced: int = 0


class Writers:
    """prompts, rejected and duplicates, streamed; kept rows buffered into row groups of ROW_GROUP_ROWS. A row
    group is compressed and written in a thread (Arrow releases the GIL) while this process reads the next
    results: with many workers this process is the stage's bottleneck. One write in flight; order is kept."""

    def __init__(self, stack: ExitStack, out_dir: Path):
        def writer(name, schema):
            path = stack.enter_context(committed(prompt_table(out_dir, name)))
            return stack.enter_context(pq.ParquetWriter(path, schema, compression="zstd"))
        self.prompts = writer("prompts", tables.PROMPTS)
        self.rejected = writer("rejected", tables.REJECTED)
        self.duplicates = writer("duplicates", tables.DUPLICATES)
        self.pending: list[pa.RecordBatch] = []
        self.thread = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="prompts-writer"))
        self.writing: Future | None = None  # the executor, closed first, lets it finish before the writers close

    def keep(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        if sum(b.num_rows for b in self.pending) >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending, schema=tables.PROMPTS)
        self.pending = []
        self._wait()
        self.writing = self.thread.submit(self.prompts.write_table, table, row_group_size=max(1, table.num_rows))

    def finish(self) -> None:
        self.flush()
        self._wait()

    def _wait(self) -> None:
        if self.writing is not None:
            writing, self.writing = self.writing, None
            writing.result()  # a failed write raises here


class Deduper:
    """The first occurrence of a prompt_id, in source order, is kept; later ones are listed with the keeper."""

    def __init__(self, names: list[str], writers: Writers):
        self.names, self.writers = names, writers
        self.kept: dict[bytes, int] = {}  # 16-byte prompt_id prefix -> index of the source that keeps it

    def add(self, result: ChunkResult, tally: SourceTally) -> None:
        name = self.names[result.source]
        keep, duplicates, rejected = [], [], list(result.rejected)
        candidates = result.candidates
        assert candidates is not None  # ChunkProcessor.process sets them on every result it returns
        rows = candidates["source_row"].to_pylist()
        for i, key in enumerate(result.keys):
            if (keeper := self.kept.get(key)) is not None:
                duplicates.append((rows[i], i, keeper))
            elif i in result.too_long:
                self.kept[key] = result.source
                rejected.append((rows[i], "too_long", result.too_long[i], result.ids[i]))
            else:
                self.kept[key] = result.source
                keep.append(i)
        if keep:
            self.writers.keep(candidates.take(pa.array(keep, pa.int64())) if len(keep) < len(rows)
                              else candidates)
        if duplicates:
            pids = pc.take(candidates["prompt_id"], pa.array([i for _, i, _ in duplicates], pa.int64()))
            self.writers.duplicates.write_table(pa.table({
                "source": [name] * len(duplicates), "source_row": [r for r, _, _ in duplicates], "prompt_id": pids,
                "kept_source": [self.names[k] for _, _, k in duplicates],
                "id": [result.ids[i] for _, i, _ in duplicates]}, schema=tables.DUPLICATES))
        if rejected:
            rejected.sort(key=lambda r: r[0])
            self.writers.rejected.write_table(pa.table({
                "source": [name] * len(rejected), "source_row": [r[0] for r in rejected],
                "reason": [r[1] for r in rejected], "detail": [r[2] for r in rejected],
                "id": [r[3] for r in rejected]}, schema=tables.REJECTED))
        tally.rows_read += result.rows_read
        tally.system_replaced += result.system_replaced
        tally.rejected += len(rejected)
        tally.duplicates += len(duplicates)


def default_workers() -> int:
    return len(os.sched_getaffinity(0))


def build_prompts(config: Config, out_dir: Path, workers: int | None = None) -> dict:
    """Write prompts/, rejected/, duplicates/ and sources.parquet under out_dir; return per-source counts.
    At most `workers` processes render and tokenize (default: the config's prompts.workers, else every usable core);
    an input under pool.small_input_rows() is rendered in this process."""
    workers = workers or config.prompts.workers or default_workers()
    model = config.target_model
    model.stop_token_ids  # fails now, before any row is read, if the template is missing
    sources = config.sources
    opened = [open_source(source, i) for i, source in enumerate(sources)]  # file problems stop here
    tallies = [SourceTally() for _ in sources]
    with ExitStack() as stack:
        writers = Writers(stack, out_dir)
        deduper = Deduper([s.name for s in sources], writers)
        bars = [stack.enter_context(tqdm(desc=f"prompts {s.name}", unit="row", mininterval=5))
                for s in sources]
        chunks, workers = workers_to_start((chunk for chunk_iter, _, _ in opened for chunk in chunk_iter), workers)
        for result in chunk_results(config, model, chunks, workers):
            deduper.add(result, tallies[result.source])
            bars[result.source].update(result.rows_read)
        writers.finish()
    write_table(pa.Table.from_pylist([
        {"source": s.name, "origin": origin, "fingerprint": fingerprint, "rows_read": t.rows_read,
         "system_replaced": t.system_replaced, "row_limit": s.limit or None}
        for s, (_, origin, fingerprint), t in zip(sources, opened, tallies)],
        schema=tables.SOURCES), prompt_table(out_dir, "sources"))
    return {s.name: {"read": t.rows_read, "rejected": t.rejected, "duplicates": t.duplicates}
            for s, t in zip(sources, tallies)}


TOP_REASONS = 3  # reason codes named per source on the console; the rest are in rejected.parquet


def lost_rows_lines(counts: dict, out_dir: Path) -> list[str]:
    """One line per source that lost rows to rejection (build_prompts' counts): how many of the rows read, the most
    frequent reasons (the rejected_reasons query), and where every rejected row is. Duplicates are not lost: another
    row carries the prompt."""
    import duckdb

    from shardgen.store import db

    rejected = prompt_table(out_dir, "rejected")
    con = duckdb.connect()
    db.parquet_view(con, "rejected", str(rejected), tables.REJECTED)
    reasons: dict[str, list[str]] = {}
    for row in db.query(con, "rejected_reasons"):  # per source, the most frequent reason first
        reasons.setdefault(row["source"], []).append(f"{row['reason']} {row['rows']}")
    lines = []
    for source, count in counts.items():
        if not count["rejected"]:
            continue
        top = reasons.get(source, [])
        more = f", {len(top) - TOP_REASONS} more reasons" if len(top) > TOP_REASONS else ""
        lines.append(f"prompts: source {source} lost {count['rejected']} of {count['read']} rows "
                     f"({', '.join(top[:TOP_REASONS])}{more}); each row, its reason and detail: {rejected} "
                     "(`shardgen query rejected_reasons`)")
    return lines
