"""The running cap `mamba_strategy: auto` sizes before SGLang starts (engines/sglang/running_cap.py), checked
against the pools SGLang allocated on the H200 (tests/data/sglang-logs); through the adapter in test_mamba_auto."""

import json
from pathlib import Path

import pytest

from shardgen.config import Config
from shardgen.engines.sglang import log_lines
from shardgen.engines.sglang.running_cap import CAP_LIMIT, GIB, MIB, choose, prefill_limit, running_peak_tokens

DATA = Path(__file__).resolve().parent.parent / "data"
NH8B = json.loads((DATA / "models" / "nh8b" / "config.json").read_text())
H200_MIB, H100_MIB = 143_771, 81_559  # nvidia-smi's memory.total
SEED_LIKE = [{"prompt_ids": [7] * 500, "max_new_tokens": 2048}] * 4  # 2,548 tokens a request at most


def engine(**settings):
    return Config.from_dict({"model": {"path": "/m"}, "engine": {"backend": "sglang", **settings},
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]}).engine


def allocated_gib(log: str) -> float:
    facts: dict = {}
    for line in (DATA / "sglang-logs" / log).read_text().splitlines():
        log_lines.parse_startup(line, facts)
    return facts["mamba_pool_gb"] + facts["kv_pool_gb"]


@pytest.mark.parametrize("log, state", [("tune-nh8b-no_radix-1024-fp32.log", "float32"),
                                        ("tune-nh8b-no_radix-1024-bf16.log", "bfloat16")])
def test_the_memory_estimated_for_the_pools_is_what_sglang_allocated_on_the_h200(log, state):
    # Those runs: nh8b, mem_fraction_static 0.88, the prefix cache off; SGLang gave its two pools 107.4 GiB.
    choice = choose(engine(mamba_strategy="no_radix", mem_fraction_static=0.88, args={"mamba_ssm_dtype": state}),
                    NH8B, SEED_LIKE, H200_MIB)
    assert 0.99 * allocated_gib(log) <= choice.sizes["pools_gib"] <= allocated_gib(log)  # a little low: safe
    assert choice.sizes["weights_gib"] == 15.09  # SGLang's "Load weight end ... mem usage=15.11 GB"


def test_the_cap_fills_both_pools_where_sglangs_own_split_would_leave_kv_unused():
    choice = choose(engine(mamba_strategy="no_radix"), NH8B, SEED_LIKE, H200_MIB)
    sizes = choice.sizes
    pools, state = sizes["pools_gib"] * 1024, sizes["state_mib_per_request"]  # MiB
    kv_per_request = sizes["tokens_per_request"] * sizes["kv_kib_per_token"] / 1024
    assert (sizes["tokens_per_request"], sizes["dtypes"]["ssm_state"], state) == (2548, "float32", 97.41)
    # SGLang alone: 0.9 / 1.9 of the pools for states, one a request; at that cap the KV cache stays over 60%
    # empty even with every request at its max_new_tokens
    own = int(pools * 0.9 / 1.9 / state)
    assert own == 546 and own * kv_per_request / (pools - own * state) < 0.4
    # auto: as many as fit with their states and room for every one to reach max_new_tokens
    assert choice.max_running_requests == 818 == sizes["fits"]
    assert (818 + 1) * state + 818 * kv_per_request <= pools < (819 + 1) * state + 819 * kv_per_request
    assert choice.why.startswith("109.77 GiB for the pools hold 818 requests of 97.41 MiB state and 2548 tokens")


def test_a_smaller_state_fits_more_up_to_the_largest_cap_measured():
    choice = choose(engine(mamba_strategy="no_radix", args={"mamba_ssm_dtype": "bfloat16"}), NH8B, SEED_LIKE,
                    H200_MIB)
    assert choice.sizes["fits"] == 1259 and choice.max_running_requests == CAP_LIMIT == 1024
    assert choice.why.endswith("capped at 1024, the most measured")


def test_tensor_parallel_ranks_split_the_weights_and_add_their_memory():
    one = choose(engine(mamba_strategy="no_radix"), NH8B, SEED_LIKE, H200_MIB).sizes
    two = choose(engine(mamba_strategy="no_radix", tp_size=2), NH8B, SEED_LIKE, H200_MIB).sizes
    assert two["pools_gib"] == pytest.approx(2 * one["pools_gib"] + one["weights_gib"], abs=0.02)


@pytest.mark.parametrize("settings, why", [
    ({"max_running_requests": 256}, "the cap is set (256): kept"),
    ({"args": {"max_mamba_cache_size": 600}}, "engine.args size the pools or the cap (max_mamba_cache_size): kept"),
])
def test_a_users_cap_is_left_alone(settings, why):
    choice = choose(engine(**{"mamba_strategy": "no_radix", **settings}), NH8B, SEED_LIKE, H200_MIB)
    assert choice.max_running_requests is None and choice.why.startswith(why) and choice.sizes == {}


def test_under_a_prefix_cache_the_cap_counts_each_requests_state_slots_and_sizes_the_state_pool():
    # The H200 each_turn run under SGLang's own split: 182 running (546 slots / 3) at KV usage 0.03.
    conversations = [{"prompt_ids": [7] * 300, "max_new_tokens": 64, "turns": ["a", "b", "c", "d"], "turn": 1}] * 4
    choice = choose(engine(mamba_strategy="no_buffer"), NH8B, conversations, H200_MIB)
    sizes = choice.sizes
    assert (sizes["state_slots_per_request"], sizes["tokens_per_request"]) == (3, 4 * 364)  # the last turn's KV
    per_request = 3 * sizes["state_mib_per_request"] + sizes["tokens_per_request"] * sizes["kv_kib_per_token"] / 1024
    pools = sizes["pools_gib"] * 1024
    assert choice.max_running_requests == sizes["fits"] == int((pools - sizes["state_mib_per_request"]) // per_request)
    assert choice.max_running_requests > 182 * 1.8  # SGLang's own split held 182
    assert choice.max_mamba_cache_size == 3 * choice.max_running_requests
    assert "hold 356 requests of 3 x 97.41 MiB state" in choice.why
    resumed = [{**conversations[0], "turn": 3}]  # two turns left: its KV peaks lower
    assert choose(engine(mamba_strategy="no_buffer"), NH8B, resumed, H200_MIB).sizes["tokens_per_request"] == 2 * 364
    assert choose(engine(mamba_strategy="no_radix"), NH8B, SEED_LIKE, H200_MIB).max_mamba_cache_size is None


def test_without_gpu_memory_a_hybrid_pattern_or_requests_sglang_sizes_it():
    no_radix = engine(mamba_strategy="no_radix")
    plain = {k: v for k, v in NH8B.items() if k != "hybrid_override_pattern"}
    assert choose(no_radix, NH8B, SEED_LIKE, None).why.startswith("SGLang reports no GPU memory")
    assert choose(no_radix, plain, SEED_LIKE, H200_MIB).why.startswith("not a Nemotron-H hybrid config")
    assert choose(no_radix, NH8B, [], H200_MIB).why.startswith("no requests")
    small = choose(no_radix, NH8B, SEED_LIKE, 16 * 1024)  # 16 GiB x 0.9 < the 15 GiB of weights + start-up
    assert small.max_running_requests is None and small.sizes["fits"] < 1
    assert small.why.startswith("no request fits")


def test_the_prefix_cache_admits_per_prefill_batch_only_what_its_state_copies_fit_beside_the_pools():
    # The H200 crash this prevents: no_buffer at mem_fraction_static 0.9, float32 state; the one-batch copy asked
    # 14.16 GiB (~145 admissions of 97.41 MiB) with 3.76 GiB free.
    h200 = prefill_limit(engine(mamba_strategy="no_buffer"), NH8B, H200_MIB)
    state = h200.sizes["state_mib_per_request"]
    assert (state, h200.prefill_max_requests) == (97.41, 18)
    assert 2 * 18 * state / 1024 <= h200.sizes["cow_budget_gib"] < 3.76 < 14.16
    assert prefill_limit(engine(mamba_strategy="no_buffer"), NH8B, H100_MIB).prefill_max_requests == 10
    half_state = prefill_limit(engine(mamba_strategy="extra_buffer", args={"mamba_ssm_dtype": "bfloat16"}), NH8B,
                               H200_MIB)
    assert half_state.prefill_max_requests == 36
    assert h200.why.startswith("no_buffer copies the mamba state of each request admitted on a cached prefix")


@pytest.mark.parametrize("settings, why", [
    ({"mamba_strategy": "no_radix"}, "no_radix: no prefix cache"),
    ({"mamba_strategy": "no_buffer", "args": {"prefill_max_requests": 64}}, "engine.args sets prefill_max_requests"),
])
def test_no_prefill_limit_without_a_prefix_cache_or_where_the_user_set_one(settings, why):
    choice = prefill_limit(engine(**settings), NH8B, H200_MIB)
    assert choice.prefill_max_requests is None and choice.why.startswith(why)


def test_the_running_peak_replays_the_work_in_order_each_request_growing_to_its_limit():
    # cap 2: A (10 + 5 steps) and B (5 + 1) start; C (5 + 1) takes B's slot at step 1 and leaves at step 2, when
    # A holds 12 and C 6; at step 5 A alone holds 15
    footprints = [(10, True, 5), (5, True, 1), (5, True, 1)]
    assert running_peak_tokens(footprints, 2) == 12 + 6
    assert running_peak_tokens(footprints, 3) == 11 + 6 + 6  # all at once: B and C at their limits at step 1
    assert running_peak_tokens([(40, False, 8), (1, True, 1)], 2) == 40 + 2  # a conversation held at its peak


def test_variable_lengths_size_the_kv_for_the_long_requests_the_running_set_keeps():
    # heaviest first, as the split orders a shard: a few long answers, many short ones. Their mean prompt +
    # max_new_tokens is ~690 tokens, but the long ones stay while the short ones come and go.
    work = ([{"prompt_ids": [7] * 200, "max_new_tokens": 1536}] * 200
            + [{"prompt_ids": [7] * 150, "max_new_tokens": 384}] * 600
            + [{"prompt_ids": [7] * 100, "max_new_tokens": 128}] * 1600)
    mean = sum(len(r["prompt_ids"]) + r["max_new_tokens"] for r in work) / len(work)
    choice = choose(engine(mamba_strategy="no_radix"), NH8B, work, H100_MIB)
    sizes = choice.sizes
    cap = choice.max_running_requests
    assert sizes["tokens_per_request"] > 1.5 * mean
    state, kv = sizes["state_mib_per_request"] * MIB, sizes["kv_kib_per_token"] * 1024
    pools = sizes["pools_gib"] * GIB
    footprints = [(len(r["prompt_ids"]), True, r["max_new_tokens"]) for r in work]
    # at the cap, the replayed running set fits beside its states; one more request would not
    assert (cap + 1) * state + running_peak_tokens(footprints, cap) * kv <= pools * 1.0001
    assert (cap + 2) * state + running_peak_tokens(footprints, cap + 1) * kv > pools * 0.9999
    # sized at the mean instead, the same replay overflows the pools: SGLang would retract
    at_mean = int((pools - state) // (state + mean * kv))
    assert at_mean > cap and (at_mean + 1) * state + running_peak_tokens(footprints, at_mean) * kv > pools
