"""Run the prompts stage's chunks through worker processes, results in input order, a bounded number in flight.
concurrent.futures (not multiprocessing.Pool) because it notices a worker that dies and fails instead of hanging."""

import logging
import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context

from shardgen.model.chat import ChatEncoder
from shardgen.config import Config
from shardgen.model.target import ModelInfo
from shardgen.prompts.rows import ChunkProcessor, ChunkResult, PromptsError
from shardgen.prompts import sources
from shardgen.prompts.sources import Chunk

IN_FLIGHT_PER_WORKER = 2
# Starting a worker (Python, then the tokenizer: ~1.5 CPU s on the demo) costs about what rendering and tokenizing
# this many chunks of rows costs in the stage's own process: a smaller input is done there, whatever --workers says.
SMALL_INPUT_CHUNKS = 4
IN_PROCESS = "rendered in this process"  # what the stage's log says when it starts no worker
log = logging.getLogger(__name__)
_processor: ChunkProcessor | None = None


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker builds its ChunkProcessor from. chat: ChatEncoder.portable(), so a worker never imports the
    transformers tokenizer (None for a slow tokenizer: then it loads the model's own)."""

    raw_config: dict
    fingerprint: dict
    served: dict
    chat: dict | None

    @classmethod
    def of(cls, config: Config, model: ModelInfo) -> "WorkerSetup":
        return cls(config.raw, model.fingerprint, model.served_sampling, model.chat.portable())


def _start_worker(setup: WorkerSetup) -> None:
    global _processor
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    config = Config.from_dict(setup.raw_config)
    chat = ChatEncoder.from_portable(setup.chat) if setup.chat else config.target_model.chat
    _processor = ChunkProcessor(config, setup.fingerprint, setup.served, chat)


def _process(chunk: Chunk) -> ChunkResult:
    assert _processor is not None  # the pool's initializer (_start_worker) made it in this worker
    return _processor.process(chunk)


def _executor(setup: WorkerSetup, workers: int) -> ProcessPoolExecutor:
    # spawn: the parent has Arrow and tokenizer threads that fork would copy mid-state
    return ProcessPoolExecutor(workers, get_context("spawn"), initializer=_start_worker, initargs=(setup,))


def _describe(chunk: Chunk, names: list[str]) -> str:
    return f"source {names[chunk.source]!r} rows {chunk.first_row}-{chunk.last_row}"


def _fatal_row(setup: WorkerSetup, names: list[str], chunks: list[Chunk]) -> str:
    """After a worker died: replay the chunks that were in flight in a fresh worker, then the one that kills it
    again row by row; name that row (or say the death did not repeat)."""
    with _executor(setup, 1) as pool:
        if _kills(pool, chunks[0].part(0, 0)):
            return "none: a fresh worker dies before any row (it cannot start; see the messages above)"
        killer = next((c for c in chunks if _kills(pool, c)), None)
    if killer is not None:
        with _executor(setup, 1) as pool:
            for i in range(len(killer)):
                if _kills(pool, row := killer.part(i, i + 1)):
                    return f"source {names[row.source]!r} row {row.first_row}"
    return "none found (replayed, the chunks in flight did not kill a worker again: out of memory?); in flight: " + \
        "; ".join(_describe(c, names) for c in chunks)


def _kills(pool: ProcessPoolExecutor, chunk: Chunk) -> bool:
    try:
        pool.submit(_process, chunk).result()
    except BrokenProcessPool:
        return True
    return False


def small_input_rows() -> int:
    """The fewest rows that start the stage's workers; under it, the stage renders them in its own process."""
    return SMALL_INPUT_CHUNKS * sources.CHUNK_ROWS


def workers_to_start(chunks: Iterator[Chunk], workers: int) -> tuple[Iterator[Chunk], int]:
    """The chunks (read ahead up to small_input_rows()) and `workers`, or 1 where the whole input is smaller."""
    if workers == 1:
        return chunks, 1
    ahead, rows = [], 0
    for chunk in chunks:
        ahead.append(chunk)
        rows += len(chunk)
        if rows >= small_input_rows():
            return chain(ahead, chunks), workers
    log.info("%d rows: %s, not %d workers (their start costs more below %d rows)", rows, IN_PROCESS, workers,
             small_input_rows())
    return iter(ahead), 1


def chunk_results(config: Config, model: ModelInfo, chunks: Iterable[Chunk], workers: int) -> Iterator[ChunkResult]:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # a worker is one core (the workers inherit it)
    if workers == 1:  # in this process: no transfers
        processor = ChunkProcessor(config, model.fingerprint, model.served_sampling, model.chat)
        yield from map(processor.process, chunks)
        return
    setup, names = WorkerSetup.of(config, model), [s.name for s in config.sources]
    window: deque[tuple[Chunk, Future]] = deque()
    pool = _executor(setup, workers)
    try:
        for chunk in chunks:
            window.append((chunk, pool.submit(_process, chunk)))
            if len(window) >= workers * IN_FLIGHT_PER_WORKER:
                yield _next(window, setup, names)
        while window:
            yield _next(window, setup, names)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _next(window: deque, setup: WorkerSetup, names: list[str]) -> ChunkResult:
    chunk, future = window[0]
    try:
        result = future.result()
    except BrokenProcessPool:
        in_flight = [c for c, _ in window]
        window.clear()
        raise PromptsError(f"a prompts worker died; the row that kills it: "
                           f"{_fatal_row(setup, names, in_flight)}") from None
    window.popleft()
    return result
