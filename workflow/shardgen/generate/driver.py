"""The one driver loop every engine shares: a bounded async window, completions collected as they come,
and parts committed off the event loop every N records or T seconds. `run_prompts` is how `generate`, `tune` and
the GPU benchmark all run prompts through an engine."""

import asyncio
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from shardgen.engines import Engine, Request, Result
from shardgen.engines.registry import request_sampling
from shardgen.faults import fault_point
from shardgen.generate.checkpoint import PartWriter, part_row
from shardgen.generate.turns import TurnRequest
from shardgen.store.hidden import held_bytes


# Hidden states wait in memory with their rows until the part commits: past this many bytes held, it commits now
# (nh8b's eagle3 layers take ~40 KB a position, so 512 long turns would hold gigabytes).
HIDDEN_BYTES_PER_COMMIT = 1 << 30


class PartSink:
    def __init__(self, writer: PartWriter, every_records: int, every_seconds: float):
        self.writer, self.every_records, self.every_seconds = writer, every_records, every_seconds
        self.rows: list[dict] = []
        self.held = 0  # bytes of the hidden states in `rows`
        self.last_commit = time.monotonic()
        self.lock = asyncio.Lock()
        self.committed = 0

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.held += held_bytes(row.get("hidden_states"))

    def due(self) -> bool:
        return len(self.rows) >= self.every_records or self.held >= HIDDEN_BYTES_PER_COMMIT or (
            bool(self.rows) and time.monotonic() - self.last_commit >= self.every_seconds)

    async def commit(self, force: bool = False) -> None:
        async with self.lock:
            if not self.rows or not (force or self.due()):
                return
            rows, self.rows, held = self.rows, [], self.held
            self.held = 0
            try:
                # The engine's tokenizer manager shares this loop: never block it on disk.
                await asyncio.to_thread(self.writer.commit, rows)
            except BaseException:
                self.rows, self.held = rows + self.rows, held + self.held  # not committed: kept for a later try
                raise
            self.committed += len(rows)
            self.last_commit = time.monotonic()


Follow = Callable[[TurnRequest, dict], TurnRequest | None]


async def drive(engine: Engine, prompts: Iterable[TurnRequest], *, window: int, sink: PartSink, shard: int,
                attempt: int, gpu: str, progress: tqdm, follow: Follow | None = None,
                context_length: int | None = None) -> None:
    """Keep `window` requests in flight until every prompt has a committed row. A failed commit (disk full, I/O
    error) stops the feeding and is raised once the requests in flight are back. With `follow`, a conversation
    keeps its slot: follow(prompt, row) gives the next turn's request as soon as a turn completes (or None at the
    end), so conversations interleave in the window and no turn waits for the other conversations' earlier turns.
    With `context_length`, a turn that does not fit it (a followed one, or one a conversation resumes at) is not sent:
    it ends its conversation as a context_exhausted row."""
    slots = asyncio.Semaphore(window)
    running: set[asyncio.Task] = set()
    failures: list[BaseException] = []

    async def turn(prompt: TurnRequest) -> dict:
        submitted, start = datetime.now(timezone.utc), time.monotonic()
        request = Request(f"{prompt.gen_key}-a{attempt}", prompt.prompt_ids,
                          request_sampling(engine.info.backend, prompt.sampling.as_dict()), prompt.source)
        try:
            result = await engine.generate(request)
        except Exception as err:  # a failed request is recorded, never fatal to the shard
            result = Result([], "", "abort", len(prompt.prompt_ids), error=f"{type(err).__name__}: {err}")
        row = part_row(prompt, shard=shard, attempt=attempt, gpu=gpu, result=result, submitted=submitted,
                       latency_s=time.monotonic() - start)
        sink.add(row)
        fault_point("mid_batch")
        progress.update(1)
        await sink.commit()
        return row

    async def one(prompt: TurnRequest | None) -> None:
        try:
            while prompt is not None and not failures:
                if context_length and (why := prompt.exhausted(context_length)) is not None:
                    sink.add(part_row(prompt, shard=shard, attempt=attempt, gpu=gpu, ended=why))
                    progress.update(1)
                    await sink.commit()
                    break
                row = await turn(prompt)
                prompt = follow(prompt, row) if follow and row["finish_reason"] != "abort" else None
        except Exception as err:
            failures.append(err)
        finally:
            slots.release()

    async def tick() -> None:
        try:
            while True:
                await asyncio.sleep(min(1.0, sink.every_seconds))
                await sink.commit()
        except Exception as err:
            failures.append(err)

    ticker = asyncio.create_task(tick())
    try:
        for prompt in prompts:
            await slots.acquire()
            if failures:
                break
            task = asyncio.create_task(one(prompt))
            running.add(task)
            task.add_done_callback(running.discard)
        await asyncio.gather(*running)
    finally:
        ticker.cancel()
    if failures:
        raise failures[0]
    await sink.commit(force=True)


def window(config, engine: Engine, conversations: bool = False) -> int:
    """Requests kept in flight: engine.inflight x what the engine runs at once, so its queue never runs dry. With
    conversations regenerated each_turn, what the engine runs at once: each conversation keeps its slot from turn to
    turn, and one waiting in the queue would leave its history in the prefix cache, where the running ones' growth
    evicts it before its next turn is admitted (an H100 run at 2x took 82K of 3.23M prompt tokens from the cache)."""
    if conversations:
        return max(1, engine.info.max_running_requests)
    return config.engine.window(engine.info.max_running_requests)


def run_prompts(engine: Engine, prompts: Sequence[TurnRequest | dict], parts_dir: Path, config, *, shard: int,
                attempt: int, gpu: str, desc: str, follow: Follow | None = None) -> int:
    """Generate `prompts` (turn requests, or prompts rows: their first turn) on a started engine into parts
    committed in parts_dir (every checkpoint.every_records or every_seconds), with a progress bar on stderr over
    every turn left; returns the rows committed. A failed commit raises OSError."""
    requests = [p if isinstance(p, TurnRequest) else TurnRequest.first(p) for p in prompts]
    conversations = follow is not None and any(r.turns_left() > 1 for r in requests)
    total = sum(r.turns_left() for r in requests) if follow else len(requests)
    sink = PartSink(PartWriter(parts_dir), **config.checkpoint.as_dict())
    with tqdm(total=total, desc=desc, unit="req", file=sys.stderr, mininterval=2) as bar:
        engine.run(drive(engine, requests, window=window(config, engine, conversations), sink=sink, shard=shard,
                         attempt=attempt, gpu=gpu, progress=bar, follow=follow,
                         context_length=config.model.context_length))
    return sink.committed
