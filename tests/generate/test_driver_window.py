"""How many requests the driver keeps in flight (driver.run_prompts): engine.inflight x the running cap for single
turns, the running cap alone for conversations regenerated each_turn, so no conversation's history waits in the
engine's queue while the running ones evict it from the prefix cache."""

import asyncio

from shardgen.config import Config
from shardgen.engines import EngineInfo, Result
from shardgen.generate.driver import run_prompts
from shardgen.generate.turns import TurnRequest

from helpers import greedy_sampling

CAP = 3


class CountingEngine:
    info = EngineInfo("fake", CAP)

    def __init__(self):
        self.in_flight = self.peak = 0

    def run(self, coro):
        return asyncio.run(coro)

    async def generate(self, request):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.002)
        self.in_flight -= 1
        return Result([7, 2], "ok", "stop", len(request.prompt_ids))


def config(tmp_path):
    return Config.from_dict({"results_dir": str(tmp_path), "model": {"path": "/m", "context_length": 2048},
                             "engine": {"inflight": 2.0, "max_running_requests": CAP},
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def rows(n, turns):
    return [{"prompt_id": f"p{i}", "gen_key": f"{i:064x}", "prompt_ids": [i + 1], "max_new_tokens": 4,
             "turns": [f"q{t}" for t in range(turns)] if turns > 1 else None, **greedy_sampling()} for i in range(n)]


def follow(prompt: TurnRequest, row: dict):
    return prompt.next(row["completion"], row["output_ids"], lambda history, _: [len(history)])


def test_single_turns_keep_inflight_times_the_cap_in_flight(tmp_path):
    engine = CountingEngine()
    assert run_prompts(engine, rows(20, 1), tmp_path, config(tmp_path), shard=0, attempt=1, gpu="cpu", desc="s",
                       follow=follow) == 20
    assert engine.peak == 2 * CAP


def test_conversations_keep_only_what_runs_at_once_in_flight(tmp_path):
    engine = CountingEngine()
    assert run_prompts(engine, rows(10, 3), tmp_path, config(tmp_path), shard=0, attempt=1, gpu="cpu", desc="s",
                       follow=follow) == 30  # every turn of every conversation
    assert engine.peak == CAP


def test_a_resumed_turn_that_no_longer_fits_the_context_ends_its_conversation_unsent(tmp_path):
    # a conversation resumed at turn 2 (its turn 1 committed before a kill) whose history outgrew the context
    first = TurnRequest.first(rows(1, 3)[0])
    resumed = first.next("answer", [7, 2], lambda history, _: [5] * 2100)
    cfg = config(tmp_path)
    assert resumed.turn == 2 and resumed.exhausted(cfg.model.context_length)
    engine = CountingEngine()
    assert run_prompts(engine, [resumed], tmp_path, cfg, shard=0, attempt=2, gpu="cpu", desc="s", follow=follow) == 1
    assert engine.peak == 0  # nothing was sent
    import pyarrow.parquet as pq

    (row,) = [r for part in sorted(tmp_path.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert (row["turn"], row["finish_reason"]) == (2, "context_exhausted")
