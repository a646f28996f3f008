"""The one driver loop every engine shares: a bounded async window, completions collected as they come,
and parts committed off the event loop every N records or T seconds. `run_prompts` is how `generate`, `tune` and
the GPU benchmark all run prompts through an engine."""

import asyncio
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from shardgen.engines import Engine, Request, Result
from shardgen.faults import fault_point
from shardgen.generate.checkpoint import PartWriter


class PartSink:
    def __init__(self, writer: PartWriter, every_records: int, every_seconds: float):
        self.writer, self.every_records, self.every_seconds = writer, every_records, every_seconds
        self.rows: list[dict] = []
        self.last_commit = time.monotonic()
        self.lock = asyncio.Lock()
        self.committed = 0

    def due(self) -> bool:
        return len(self.rows) >= self.every_records or (
            bool(self.rows) and time.monotonic() - self.last_commit >= self.every_seconds)

    async def commit(self, force: bool = False) -> None:
        async with self.lock:
            if not self.rows or not (force or self.due()):
                return
            rows, self.rows = self.rows, []
            try:
                # The engine's tokenizer manager shares this loop: never block it on disk.
                await asyncio.to_thread(self.writer.commit, rows)
            except BaseException:
                self.rows = rows + self.rows  # not committed: keep them for a later attempt
                raise
            self.committed += len(rows)
            self.last_commit = time.monotonic()


def _row(prompt: dict, result: Result, shard: int, attempt: int, gpu: str, submitted: datetime, latency: float):
    error = result.error
    if error is None and result.prompt_tokens != len(prompt["prompt_ids"]):
        error = f"engine counted {result.prompt_tokens} prompt tokens, we sent {len(prompt['prompt_ids'])}"
    return {
        "prompt_id": prompt["prompt_id"], "gen_key": prompt["gen_key"], "shard": shard, "attempt": attempt,
        "completion": result.text, "output_ids": result.output_ids,
        "finish_reason": "abort" if error else result.finish_reason, "prompt_tokens": len(prompt["prompt_ids"]),
        "completion_tokens": len(result.output_ids), "cached_tokens": result.cached_tokens, "latency_s": latency,
        "submitted_at": submitted, "finished_at": datetime.now(timezone.utc), "gpu": gpu, "error": error,
        **_turn_columns(prompt),
        "max_new_tokens": prompt["max_new_tokens"],  # not a part column: the parts index sums it for the ETA
    }


def _turn_columns(prompt: dict) -> dict:
    """conversation_id, turn and base_key of a turn (a plain prompt is turn 1 of itself); turn t >= 2 also
    carries its exact prompt (the prompts row holds turn 1's)."""
    turn = prompt.get("turn", 1)
    later = turn > 1
    return {"conversation_id": prompt.get("conversation_id", prompt["prompt_id"]), "turn": turn,
            "base_key": prompt.get("base_key", prompt["gen_key"]),
            "messages": prompt["history"] if later else None, "prompt_ids": prompt["prompt_ids"] if later else None}


def _ended_row(prompt: dict, why: str, shard: int, attempt: int, gpu: str) -> dict:
    """A turn that is not run because it does not fit the context: the conversation ends before it."""
    now = datetime.now(timezone.utc)
    return {
        "prompt_id": prompt["prompt_id"], "gen_key": prompt["gen_key"], "shard": shard, "attempt": attempt,
        "completion": None, "output_ids": [], "finish_reason": "context_exhausted",
        "prompt_tokens": len(prompt["prompt_ids"]), "completion_tokens": 0, "cached_tokens": 0, "latency_s": 0.0,
        "submitted_at": now, "finished_at": now, "gpu": gpu, "error": why, **_turn_columns(prompt),
    }


Follow = Callable[[dict, dict], tuple[dict | None, str | None]]


async def drive(engine: Engine, prompts: Iterable[dict], *, window: int, sink: PartSink, shard: int, attempt: int,
                gpu: str, progress: tqdm, follow: Follow | None = None) -> None:
    """Keep `window` requests in flight until every prompt has a committed row. A failed commit (disk full, I/O
    error) stops the feeding and is raised once the requests in flight are back. With `follow`, a conversation
    keeps its slot: follow(prompt, row) gives the next turn's request as soon as a turn completes (or None at the
    end; or the request and why it cannot run, recorded as a context_exhausted row), so conversations interleave
    in the window and no turn waits for the other conversations' earlier turns."""
    slots = asyncio.Semaphore(window)
    running: set[asyncio.Task] = set()
    failures: list[BaseException] = []

    async def turn(prompt: dict) -> dict:
        submitted, start = datetime.now(timezone.utc), time.monotonic()
        request = Request(f"{prompt['gen_key']}-a{attempt}", prompt["prompt_ids"], {
            k: prompt[k] for k in ("max_new_tokens", "temperature", "top_p", "top_k")})
        try:
            result = await engine.generate(request)
        except Exception as err:  # a failed request is recorded, never fatal to the shard
            result = Result([], "", "abort", len(prompt["prompt_ids"]), error=f"{type(err).__name__}: {err}")
        row = _row(prompt, result, shard, attempt, gpu, submitted, time.monotonic() - start)
        sink.rows.append(row)
        fault_point("mid_batch")
        progress.update(1)
        await sink.commit()
        return row

    async def one(prompt: dict | None) -> None:
        try:
            while prompt is not None and not failures:
                row = await turn(prompt)
                prompt, why = follow(prompt, row) if follow and row["finish_reason"] != "abort" else (None, None)
                if why is not None:  # the conversation ends before this turn
                    sink.rows.append(_ended_row(prompt, why, shard, attempt, gpu))
                    progress.update(1)
                    await sink.commit()
                    prompt = None
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


def window(config, engine: Engine) -> int:
    """Requests kept in flight: engine.inflight x what the engine runs at once, so its queue never runs dry."""
    return config.engine.window(engine.info.max_running_requests)


def run_prompts(engine: Engine, prompts: list[dict], parts_dir: Path, config, *, shard: int, attempt: int, gpu: str,
                desc: str, follow: Follow | None = None, total: int | None = None) -> int:
    """Generate `prompts` on a started engine into parts committed in parts_dir (every checkpoint.every_records or
    every_seconds), with a progress bar on stderr; returns the rows committed. A failed commit raises OSError."""
    sink = PartSink(PartWriter(parts_dir), **config.checkpoint.as_dict())
    with tqdm(total=total or len(prompts), desc=desc, unit="req", file=sys.stderr, mininterval=2) as bar:
        engine.run(drive(engine, prompts, window=window(config, engine), sink=sink, shard=shard, attempt=attempt,
                         gpu=gpu, progress=bar, follow=follow))
    return sink.committed
