"""`mamba_strategy: auto`: the strategy resolved per run from the work (rules in engines/sglang/mamba_auto.py, whose
thresholds await the H200 measurement of issue 24) and, with `no_radix` and no cap set, the running cap
(engines/sglang/running_cap.py), logged and recorded in the done file; through the SGLang adapter over
tests/fake_sglang (no GPU ran: nothing here says which strategy or cap is faster)."""

import json
import re

import pytest

from shardgen.engines.sglang.mamba_auto import LONG_PREFIX_TOKENS, resolve
from shardgen.layout import Layout
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts

from helpers import run_generate


def prompt(ids, turns=1, turn=1):
    return {"prompt_ids": ids, "turns": [f"user {t}" for t in range(turns)], "turn": turn}


def test_independent_single_turn_prompts_get_no_radix():
    choice = resolve([prompt([1, 2, i] * 200) for i in range(10)])  # short common opening only
    assert (choice.strategy, choice.multi_turn, choice.shared_prefix) == ("no_radix", 0, 0)
    assert "independent single-turn prompts" in choice.why


def test_a_conversation_with_turns_still_to_run_gets_the_prefix_cache():
    work = [prompt([i] * 20) for i in range(9)] + [prompt([99] * 20, turns=3, turn=2)]
    choice = resolve(work)
    assert (choice.strategy, choice.multi_turn) == ("no_buffer", 1)
    assert choice.why.startswith("1 of 10 prompts are conversations regenerated each_turn")
    assert resolve([prompt([5] * 20, turns=3, turn=3)]).strategy == "no_radix"  # its last turn: nothing to reuse


def test_prompts_sharing_a_long_system_prompt_get_the_prefix_cache():
    system = list(range(LONG_PREFIX_TOKENS))
    shared = [prompt(system + [i, i]) for i in range(6)]
    alone = [prompt([1000 + i] * (LONG_PREFIX_TOKENS + 5)) for i in range(4)]
    choice = resolve(shared + alone)
    assert (choice.strategy, choice.shared_prefix, choice.sampled) == ("no_buffer", 6, 10)
    fewer = shared[:4] + [prompt([2000 + i] * (LONG_PREFIX_TOKENS + 1)) for i in range(6)]
    assert (resolve(fewer).strategy, resolve(fewer).shared_prefix) == ("no_radix", 4)  # 4 of 10: under half


@pytest.fixture
def generate_auto(make_config, write_jsonl, monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(tmp_path / "gpu-locks"))

    def run(source: dict, cap: int | None = 4, **env) -> tuple[dict, str]:
        cfg = make_config([source], engine={"backend": "sglang", "mamba_strategy": "auto", "max_running_requests": cap,
                                            "args": {}}, gpus=1, shards=None)
        layout = Layout(cfg.results)
        build_prompts(cfg, layout.prompts_dir)
        split(layout.prompts, layout.split_dir, 1)
        proc = run_generate(cfg, 0, "0.5.17", **env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(layout.done(0).read_text())["engine"], proc.stderr

    return run


def test_auto_is_resolved_logged_and_recorded_for_single_turn_work(generate_auto, write_jsonl):
    rows = [{"query": f"Question {i}: " + "why " * i} for i in range(12)]
    engine, log = generate_auto({"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"})
    auto = engine["mamba_strategy_auto"]
    assert (auto["strategy"], auto["prompts"], auto["multi_turn"]) == ("no_radix", 12, 0)
    assert engine["server_args"]["disable_radix_cache"] is True and "mamba_radix_cache_strategy" not in \
        engine["server_args"]
    assert re.search(r"mamba_strategy auto: no_radix, as independent single-turn prompts", log)
    assert engine["running_cap_auto"] == {"max_running_requests": None, "why": "the cap is set (4): kept", "sizes": {},
                                          "max_mamba_cache_size": None}
    assert engine["server_args"]["max_running_requests"] == 4


def test_auto_sizes_the_running_cap_before_the_start_when_none_is_set(generate_auto, write_jsonl):
    # The demo model is tiny: on an H200's memory (what the fake reports) its pools hold far more than the most
    # measured, so the cap is that; the cap and the CUDA-graph limit reach SGLang, and the engine runs at it.
    source = {"name": "q", "path": write_jsonl("q.jsonl", [{"query": f"Question {i}?"} for i in range(12)]),
              "format": "query_response"}
    engine, log = generate_auto(source, cap=None, FAKE_SGLANG_GPU_MIB="143771")
    chosen = engine["running_cap_auto"]
    assert chosen["max_running_requests"] == 1024 < chosen["sizes"]["fits"]
    assert chosen["sizes"]["gpu_mib"] == 143771 and chosen["sizes"]["mem_fraction_static"] == 0.9
    assert engine["server_args"]["max_running_requests"] == engine["server_args"]["cuda_graph_max_bs_decode"] == 1024
    assert engine["max_running_requests"] == 1024
    assert re.search(r"running cap auto: 1024, as [\d.]+ GiB for the pools hold \d+ requests", log)


def test_auto_leaves_the_cap_to_sglang_when_it_reports_no_gpu_memory(generate_auto, write_jsonl):
    source = {"name": "q", "path": write_jsonl("q.jsonl", [{"query": f"Question {i}?"} for i in range(12)]),
              "format": "query_response"}
    unknown, log = generate_auto(source, cap=None)  # the fake, like SGLang on a host without a GPU: no memory
    assert unknown["running_cap_auto"]["max_running_requests"] is None
    assert "max_running_requests" not in unknown["server_args"]
    assert "running cap auto: SGLang's own, as SGLang reports no GPU memory" in log


def test_auto_gives_each_turn_conversations_the_prefix_cache(generate_auto, write_jsonl):
    rows = [{"conversations": [{"from": "human", "value": f"Question {i}?"}, {"from": "gpt", "value": "An answer."},
                               {"from": "human", "value": "And then?"}, {"from": "gpt", "value": "Another."}]}
            for i in range(6)]
    engine, log = generate_auto({"name": "chat", "path": write_jsonl("chat.jsonl", rows), "format": "sharegpt",
                                 "multi_turn": "each_turn"})
    assert (engine["mamba_strategy_auto"]["strategy"], engine["mamba_strategy_auto"]["multi_turn"]) == ("no_buffer", 6)
    assert engine["server_args"]["mamba_radix_cache_strategy"] == "no_buffer"
    assert engine["resolved"]["mamba_radix_cache_strategy"] == "no_buffer"
    assert "mamba_strategy auto: no_buffer, as 6 of 6 prompts are conversations regenerated each_turn" in log


def test_the_prefix_cache_bounds_admissions_per_prefill_batch(generate_auto, write_jsonl):
    rows = [{"conversations": [{"from": "human", "value": f"Question {i}?"}, {"from": "gpt", "value": "An answer."},
                               {"from": "human", "value": "And then?"}, {"from": "gpt", "value": "Another."}]}
            for i in range(6)]
    engine, log = generate_auto({"name": "chat", "path": write_jsonl("chat.jsonl", rows), "format": "sharegpt",
                                 "multi_turn": "each_turn"}, FAKE_SGLANG_GPU_MIB="81559")
    limit = engine["prefill_limit_auto"]["prefill_max_requests"]
    assert limit >= 1 and engine["server_args"]["prefill_max_requests"] == limit
    assert engine["resolved"].get("prefill_max_requests", limit) == limit
    assert re.search(rf"prefill limit auto: {limit}, as no_buffer copies the mamba state", log)

