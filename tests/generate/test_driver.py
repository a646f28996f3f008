"""The shared driver loop, against a test-only fake engine (no model): window bound, commit cadence, failures."""

import asyncio

import pyarrow.parquet as pq
from tqdm import tqdm

from shardgen.generate.driver import PartSink, drive
from shardgen.engines import EngineInfo, Result
from shardgen.generate.checkpoint import PartWriter
from shardgen.generate.turns import TurnRequest

from helpers import greedy_sampling


class FakeEngine:
    max_running_requests = 4
    info = EngineInfo("fake", max_running_requests)

    def __init__(self, fail_rid_suffix=None):
        self.in_flight = self.peak = 0
        self.rids = []
        self.fail = fail_rid_suffix

    async def generate(self, request):
        self.rids.append(request.rid)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.001 * (len(self.rids) % 5))  # completions come back out of order
        self.in_flight -= 1
        if self.fail and request.prompt_ids == [13]:
            raise RuntimeError("CUDA error: device-side assert")
        return Result([7, 8, 2], "ok", "stop", len(request.prompt_ids))


def prompts(n):
    return [TurnRequest.first({"prompt_id": f"p{i}", "gen_key": f"{i:064x}", "prompt_ids": [i], "max_new_tokens": 8,
                               **greedy_sampling()}) for i in range(n)]


def run(engine, tmp_path, n, window, every_records):
    sink = PartSink(PartWriter(tmp_path), every_records=every_records, every_seconds=3600)
    with tqdm(total=n, disable=True) as bar:
        asyncio.run(drive(engine, prompts(n), window=window, sink=sink, shard=0, attempt=3, gpu="cpu", progress=bar))
    return sorted(tmp_path.glob("part-*.parquet"))


def test_window_is_bounded_and_every_prompt_is_committed_once(tmp_path):
    engine = FakeEngine()
    parts = run(engine, tmp_path, 50, window=6, every_records=8)
    assert engine.peak == 6
    rows = [r for p in parts for r in pq.read_table(p).to_pylist()]
    assert sorted(r["prompt_id"] for r in rows) == sorted(f"p{i}" for i in range(50))
    assert [pq.read_metadata(p).num_rows for p in parts][:-1] == [8] * (len(parts) - 1)  # commits every 8
    assert len(set(engine.rids)) == 50 and all(r.endswith("-a3") for r in engine.rids)  # unique per attempt
    assert all(r["attempt"] == 3 and r["completion_tokens"] == 3 for r in rows)


def test_a_failing_request_is_recorded_not_fatal(tmp_path):
    parts = run(FakeEngine(fail_rid_suffix=True), tmp_path, 20, window=4, every_records=100)
    rows = {r["prompt_id"]: r for p in parts for r in pq.read_table(p).to_pylist()}
    assert len(rows) == 20
    assert rows["p13"]["finish_reason"] == "abort" and "device-side assert" in rows["p13"]["error"]
    assert rows["p12"]["finish_reason"] == "stop"


def test_hidden_states_held_past_the_limit_commit_before_the_record_count(tmp_path, monkeypatch):
    import torch

    from shardgen.generate import driver

    monkeypatch.setattr(driver, "HIDDEN_BYTES_PER_COMMIT", 3 * 1024)
    sink = PartSink(PartWriter(tmp_path), every_records=100, every_seconds=3600)
    states = {"states": torch.zeros(512, dtype=torch.bfloat16), "header": {}}  # 1 KiB a turn
    sink.add({"hidden_states": states})
    sink.add({"hidden_states": None})
    sink.add({"hidden_states": states})
    assert sink.held == 2048 and not sink.due()
    sink.add({"hidden_states": states})
    assert sink.due()  # 3 KiB held: commit, whatever the record count
