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
    return Config.from_dict({"results_dir": str(tmp_path), "model": {"path": "/m"},
                             "engine": {"inflight": 2.0, "max_running_requests": CAP},
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def rows(n, turns):
    return [{"prompt_id": f"p{i}", "gen_key": f"{i:064x}", "prompt_ids": [i + 1], "max_new_tokens": 4,
             "turns": [f"q{t}" for t in range(turns)] if turns > 1 else None, **greedy_sampling()} for i in range(n)]


def follow(prompt: TurnRequest, row: dict):
    return prompt.next(row["completion"], row["output_ids"], lambda history, _: [len(history)]), None


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
