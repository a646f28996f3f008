"""What a shard's done file records of its engine run through the real SGLang adapter and tests/fake_sglang (no
GPU): the scheduler's retractions, and the prefix cache's share per turn index, which `shardgen diagnose` reads."""

import json

import pyarrow.parquet as pq
import pytest

from shardgen.cli import main
from shardgen.layout import Layout
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts

from helpers import CONVERSATIONS, part_rows, run_generate


@pytest.fixture
def sglang_config(make_config, write_jsonl, monkeypatch, tmp_path):
    """A config for the fake SGLang (the prefix cache on: no_buffer, 4 running) over `rows` of a source."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(tmp_path / "locks"))

    def make(source: dict, rows: list[dict]):
        cfg = make_config([{**source, "path": write_jsonl(f"{source['name']}.jsonl", rows)}],
                          engine={"backend": "sglang", "mamba_strategy": "no_buffer", "max_running_requests": 4,
                                  "args": {}}, gpus=1)
        layout = Layout(cfg.results)
        build_prompts(cfg, layout.prompts_dir)
        split(layout.prompts, layout.split_dir, 1)
        return cfg, layout
    return make


def conversations() -> list[dict]:
    """helpers.CONVERSATIONS as sharegpt rows: 3 conversations of 5, 2 and 1 turns."""
    rows = []
    for system, turns in CONVERSATIONS.values():
        messages = [{"from": "human", "value": user} if i % 2 == 0 else {"from": "gpt", "value": original}
                    for user, _, original in turns for i in (0, 1)]
        rows.append({"conversations": messages, **({"system": system} if system else {})})
    return rows


def diagnosis(layout: Layout, capsys) -> list[dict]:
    assert main(["--results", str(layout.root), "diagnose", "--json"]) == 0
    return json.loads(capsys.readouterr().out)[str(layout.shard_dir(0))]["findings"]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_retractions_reach_the_done_file_and_the_diagnosis(sglang_config, capsys):
    cfg, layout = sglang_config({"name": "q", "format": "query_response"},
                                [{"query": f"Question {i}: " + "why " * i} for i in range(12)])
    proc = run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_RETRACTIONS="3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "KV cache pool is full. Retract requests." in proc.stderr  # the job's log keeps the lines
    done = json.loads(layout.done(0).read_text())
    # the fake's i-th line takes back i requests and 700 i tokens
    assert done["engine"]["retractions"] == {"events": 3, "requests": 6, "tokens": 4200, "uncounted": 0}
    (finding,) = [f for f in diagnosis(layout, capsys) if f["code"] == "retractions"]
    assert "retracted running requests 3 times (6 requests, 4200 tokens of KV given back" in finding["message"]
    assert finding["evidence"] == [f"engine.retractions: {done['engine']['retractions']}"]
    assert any("engine.max_running_requests" in a for a in finding["advice"])


def test_the_prefix_cache_share_per_turn_is_recorded(sglang_config, capsys):
    cfg, layout = sglang_config({"name": "chat", "format": "sharegpt", "multi_turn": "each_turn"}, conversations())
    proc = run_generate(cfg, 0, "0.5.17")
    assert proc.returncode == 0, proc.stderr[-3000:]
    done = json.loads(layout.done(0).read_text())
    assert done["engine"]["retractions"] == {"events": 0, "requests": 0, "tokens": 0, "uncounted": 0}
    by_turn = {t["turn"]: t for t in done["prefix_cache_by_turn"]}
    assert {t: row["requests"] for t, row in by_turn.items()} == {1: 3, 2: 2, 3: 1, 4: 1, 5: 1}

    # each figure against the parts: the engine's cached_tokens, and the tokens a later turn's prompt shares with
    # its conversation's previous prompt and answer (turn 1's prompt is the prompts row's)
    rows = {(r["conversation_id"], r["turn"]): r for r in part_rows(layout)}
    first = {r["conversation_id"]: r["prompt_ids"] for r in pq.read_table(layout.split(0)).to_pylist()}
    for turn, row in by_turn.items():
        mine = [r for (_, t), r in rows.items() if t == turn]
        assert row["prompt_tokens"] == sum(r["prompt_tokens"] for r in mine)
        assert row["cached_tokens"] == sum(r["cached_tokens"] for r in mine)
        assert row["cached_share"] == round(row["cached_tokens"] / row["prompt_tokens"], 4)
    shared = {t: 0 for t in by_turn if t > 1}
    for (cid, turn), r in rows.items():
        if turn > 1:
            before = rows[(cid, turn - 1)]
            history = (before["prompt_ids"] or first[cid]) + before["output_ids"]
            shared[turn] += common_prefix(r["prompt_ids"], history)
    assert {t: by_turn[t]["shared_tokens"] for t in shared} == shared and all(shared.values())
    assert by_turn[1]["shared_tokens"] is None and by_turn[1]["cached_of_shared"] is None
    # the fake's cache keeps every history: each later turn takes all it shares from it
    assert all(by_turn[t]["cached_tokens"] == shared[t] and by_turn[t]["cached_of_shared"] == 1.0 for t in shared)
    assert "prefix_cache_low" not in [f["code"] for f in diagnosis(layout, capsys)]


def test_a_cache_that_evicts_every_history_is_named(sglang_config, capsys):
    cfg, layout = sglang_config({"name": "chat", "format": "sharegpt", "multi_turn": "each_turn"}, conversations())
    proc = run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_CACHE_KEEPS="0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    later = [t for t in json.loads(layout.done(0).read_text())["prefix_cache_by_turn"] if t["turn"] > 1]
    shared = sum(t["shared_tokens"] for t in later)
    assert shared > 0 and [t["cached_of_shared"] for t in later] == [0.0] * 4
    (finding,) = [f for f in diagnosis(layout, capsys) if f["code"] == "prefix_cache_low"]
    assert f"the prefix cache is on (no_buffer) but gave only 0 of the {shared} tokens later turns share" \
        in finding["message"]
    assert "turn 2 0%, turn 3 0%, turn 4 0%, turn 5 0%" in finding["message"]
    assert any("engine.max_running_requests" in a and "engine.memory_share" in a for a in finding["advice"])
    assert all(e.startswith("prefix_cache_by_turn: ") for e in finding["evidence"])

