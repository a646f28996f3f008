"""The running cap `mamba_strategy: auto` gives SGLang when the user set none, and the state pool it sizes for it.

Left to itself with the prefix cache off, SGLang gives the Mamba state pool mamba_full_memory_ratio / (1 + ratio)
(47% at its 0.9) of the memory left after the weights, and the KV cache the rest; every running request holds one
state slot, so the cap is the pool's slot count however empty the KV cache stays. Nemotron-H-8B's float32 state is
97 MiB a request against 40 MiB of KV for 2.5K tokens, so that split leaves most of the KV unused (the seed ran at
KV usage 0.21 while the state pool capped the run).

The pools are fixed once the engine runs: SGLang allocates them at start-up, and its set_internal_state changes
only speculative-decoding thresholds and max_micro_batch_size. Reading them from a first start and restarting would
cost a second start per shard (weights and CUDA graphs: 1-2 minutes in the H200 logs). So the cap is sized before
the start from what SGLang itself will compute: with the prefix cache off and a cap of N it allocates N + 1 state
slots and gives the KV cache the rest of the memory left after the weights, which is about
    rest = tp x (GPU memory x mem_fraction_static - START_OVERHEAD) - weights
and N is the most requests whose states and KV fit in it:
    (N + 1) x state + peak_KV(N) <= rest
peak_KV(N) is the most KV the running set holds at once when N requests run at a time, found by replaying the
work in the order it is submitted (SGLang admits first come, first served): a request is admitted as soon as a slot
frees, holds its prompt and one more token per decode step, and leaves at its max_new_tokens. The running set is
biased toward long requests (short ones leave quickly, and the split puts the heaviest first): sizing it at the
mean prompt + max_new_tokens (690 tokens on the H100's 2,400 variable-length rows, where the running set's mean was
~1,070) let the KV pool fill and SGLang retracted requests 333 times, prefilling each again. At the replayed peak
every running request can reach its limit at once, whatever lengths the answers reach, so nothing is retracted;
answers that stop early (a real model's) leave part of that room unused.
What SGLang did allocate is in the same done record (`startup`), beside this choice; on the H200 logs in
tests/data/sglang-logs the memory estimated for the pools is within 1% of it, on the low side.

With the prefix cache on (`auto` picks it for `each_turn` conversations), each running request holds
SLOTS_PER_REQUEST state slots (3 for no_buffer) and SGLang's own split caps the run the same way: on the H200, 182
running at KV usage 0.03 on a 1,000-conversation each_turn run. There the same balance is struck with
slots x state per request, and SGLang is given the state pool that holds them (`max_mamba_cache_size` = cap x
slots) with the cap, so the KV cache gets the rest. A conversation regenerated each_turn keeps its slot from its
first turn to its last (the driver sends turn t+1 as turn t completes), so it holds its peak, its last turn's
turns x (first prompt + max_new_tokens), for all of its turns' decode steps; the driver keeps only as many
conversations in flight as run at once (EngineConfig.window), so no history waits in the cache to be evicted.

With the prefix cache on, the pools are SGLang's to size, but one transient is not: every request admitted on a
cached prefix gets its mamba state copied (copy-on-write), and since sglang PR #24954 all of a prefill batch's
copies are made at once, in a temporary outside the static pools. On the H200 a batch of ~145 such admissions (a
shared template prefix, 97 MiB of float32 state each) asked 14.16 GiB with 3.76 GiB free and the scheduler died.
`prefill_limit` bounds the requests one prefill batch admits (SGLang's `prefill_max_requests`) so that copy fits in
a share of the memory SGLang leaves outside mem_fraction_static."""

import heapq
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from shardgen.config.sections import EngineConfig
from shardgen.engines.model_shape import DTYPE_BYTES, ModelShape
from shardgen.engines.sglang.args import SLOTS_PER_REQUEST, run_settings
from shardgen.engines.sglang.settings import mamba_strategy

GIB, MIB = 1 << 30, 1 << 20
# Per GPU, what the CUDA context and SGLang take before the weights and pools: 1.0-1.3 GiB on the H200 logs.
START_OVERHEAD = int(1.5 * GIB)
# The largest cap measured on the H200 (`shardgen tune`: no_radix at 1,024 running). Above it nothing was measured,
# and on the bfloat16-state run decode throughput was already flat from 477 to 1,023 running (compute_saturated),
# while each step of the cap costs CUDA-graph memory and capture time.
CAP_LIMIT = 1024
# engine.args that size the pools or the cap themselves: with one of them set, the user chose.
USER_SIZING_ARGS = ("max_running_requests", "max_mamba_cache_size", "max_total_tokens")
# The prefix cache's copy-on-write temporary may take this share of the memory outside mem_fraction_static (the
# rest holds activations, CUDA graphs and the sampler: at 0.9 on the H200, 3.76 of 14 GiB was left free when it
# died); it holds the gathered states and their copies, two states per admitted request.
COW_SHARE, COW_STATES_PER_REQUEST = 0.25, 2


@dataclass(frozen=True)
class CapChoice:
    """What `auto` set the running cap to (None: left to SGLang), why, and the sizes it came from: recorded in the
    done file's engine section as `running_cap_auto`."""
    max_running_requests: int | None
    why: str
    sizes: dict = field(default_factory=dict)
    max_mamba_cache_size: int | None = None  # under a prefix cache: the state pool that holds the cap's slots

    def as_dict(self) -> dict:
        return asdict(self)


def _footprint(request: dict) -> tuple[int, bool, int]:
    """How a request holds KV while it runs: (tokens at admission, whether it grows a token per decode step, decode
    steps). A conversation regenerated each_turn is held at its peak, its last turn, for all its turns."""
    turns = max(1, len(request.get("turns") or ()) - request.get("turn", 1) + 1)
    if turns == 1:
        return len(request["prompt_ids"]), True, request["max_new_tokens"]
    return turns * (len(request["prompt_ids"]) + request["max_new_tokens"]), False, turns * request["max_new_tokens"]


def running_peak_tokens(footprints: Sequence[tuple[int, bool, int]], cap: int) -> int:
    """The most KV tokens held at once with `cap` requests running, admitted in order as slots free. KV only grows
    between departures, so the peak is just before one, with each running request at its tokens so far."""
    running: list[tuple[int, int, int, bool]] = []  # a heap of (leaves at step, admitted at step, base, grows)
    held = growing = admitted_sum = 0  # base tokens held; growing requests and the sum of their admission steps
    peak = now = 0

    def leave() -> None:
        nonlocal now, held, growing, admitted_sum, peak
        now, admitted, base, grows = heapq.heappop(running)
        peak = max(peak, held + growing * now - admitted_sum)
        held, growing, admitted_sum = held - base, growing - grows, admitted_sum - admitted * grows

    for base, grows, steps in footprints:
        if len(running) == cap:
            leave()
        heapq.heappush(running, (now + steps, now, base, grows))
        held, growing, admitted_sum = held + base, growing + grows, admitted_sum + now * grows
    while running:
        leave()
    return peak


def choose(engine: EngineConfig, model_config: dict, work: Sequence[dict], gpu_mib: float | None) -> CapChoice:
    """The cap for `engine` (its strategy already resolved) on a GPU of `gpu_mib` MiB, for these requests
    (`prompt_ids`, `max_new_tokens`)."""
    if engine.max_running_requests is not None:
        return CapChoice(None, f"the cap is set ({engine.max_running_requests}): kept")
    if sized_by_user := [k for k in USER_SIZING_ARGS if k in engine.args]:
        return CapChoice(None, f"engine.args size the pools or the cap ({', '.join(sized_by_user)}): kept")
    shape = ModelShape(model_config)
    if not shape.is_hybrid:
        return CapChoice(None, "not a Nemotron-H hybrid config (no M in hybrid_override_pattern): no state pool to "
                         "balance against the KV cache")
    if not gpu_mib:
        return CapChoice(None, "SGLang reports no GPU memory (get_device_memory_capacity): nothing to size from")
    if not work:
        return CapChoice(None, "no requests: no tokens per request to size the KV cache for")
    dtypes = shape.dtypes(run_settings(engine.args))
    state = shape.state_bytes_per_request(DTYPE_BYTES[dtypes["ssm_state"]])
    kv_per_token = shape.kv_bytes_per_token(DTYPE_BYTES[dtypes["kv"]])
    weights = shape.resident_weights() * DTYPE_BYTES[dtypes["weights"]]
    strategy = mamba_strategy(engine)
    slots = SLOTS_PER_REQUEST[strategy]
    fraction, tp = engine.memory_share, engine.tp_size
    rest = tp * (gpu_mib * MIB * fraction - START_OVERHEAD) - weights
    fits, peak = _most_that_fit(list(map(_footprint, work)), rest, slots * state, state, kv_per_token)
    tokens = peak / max(fits, 1)
    sizes = {"gpu_mib": gpu_mib, "mem_fraction_static": fraction, "tp_size": tp, "dtypes": dtypes,
             "strategy": strategy, "state_slots_per_request": slots,
             "weights_gib": round(weights / GIB, 2), "pools_gib": round(rest / GIB, 2),
             "state_mib_per_request": round(state / MIB, 2), "kv_kib_per_token": round(kv_per_token / 1024, 2),
             "tokens_per_request": round(tokens), "fits": fits}
    if fits < 1:
        return CapChoice(None, f"no request fits: {sizes['pools_gib']} GiB for the pools against "
                         f"{sizes['weights_gib']} GiB of weights; SGLang sizes it", sizes)
    cap = min(fits, CAP_LIMIT)
    held = f"{slots} x " if slots > 1 else ""
    return CapChoice(cap, f"{sizes['pools_gib']} GiB for the pools hold {fits} requests of "
                     f"{held}{sizes['state_mib_per_request']} MiB state and {sizes['tokens_per_request']} tokens of KV "
                     f"({sizes['kv_kib_per_token']} KiB each)" + (f", capped at {CAP_LIMIT}, the most measured"
                                                                  if fits > CAP_LIMIT else ""), sizes,
                     cap * slots if slots > 1 else None)


def _most_that_fit(footprints: list[tuple[int, bool, int]], rest: float, state_per_request: float, state: float,
                   kv_per_token: float) -> tuple[int, int]:
    """The largest cap N with N x state_per_request + state + peak(N) x kv_per_token <= rest (SGLang allocates one
    state slot beyond the cap), and peak(N): running_peak_tokens over the work, repeated where it has fewer than N
    requests (a cap beyond the work is moot for this shard, but its size says what the memory holds)."""
    def peak(n: int) -> int:
        return running_peak_tokens(footprints * -(-n // len(footprints)), n)

    low, high = 0, max(0, int((rest - state) // state_per_request)) + 1  # fits(low); never high
    while high - low > 1:
        middle = (low + high) // 2
        fits = middle * state_per_request + state + peak(middle) * kv_per_token <= rest
        low, high = (middle, high) if fits else (low, middle)
    return low, peak(max(low, 1))


@dataclass(frozen=True)
class PrefillChoice:
    """What the prefix cache's admissions per prefill batch were bounded to (None: left to SGLang), why, and the
    sizes: recorded in the done file's engine section as `prefill_limit_auto`."""
    prefill_max_requests: int | None
    why: str
    sizes: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def prefill_limit(engine: EngineConfig, model_config: dict, gpu_mib: float | None) -> PrefillChoice:
    """The most requests one prefill batch may admit under a prefix-cache strategy (`prefill_max_requests`), so the
    one-batch copy-on-write of their mamba states fits beside the static pools; None: nothing to bound."""
    if "prefill_max_requests" in engine.args:
        return PrefillChoice(None,
                             f"engine.args sets prefill_max_requests ({engine.args['prefill_max_requests']}): kept")
    if mamba_strategy(engine) == "no_radix":
        return PrefillChoice(None, "no_radix: no prefix cache, no state copied on admission")
    shape = ModelShape(model_config)
    if not shape.is_hybrid:
        return PrefillChoice(None, "not a Nemotron-H hybrid config: no mamba state to copy on admission")
    if not gpu_mib:
        return PrefillChoice(None, "SGLang reports no GPU memory (get_device_memory_capacity): nothing to size from")
    state = shape.state_bytes_per_request(DTYPE_BYTES[shape.dtypes(run_settings(engine.args))["ssm_state"]])
    fraction = engine.memory_share
    budget = gpu_mib * MIB * (1 - fraction) * COW_SHARE
    limit = max(1, int(budget // (COW_STATES_PER_REQUEST * state)))
    sizes = {"gpu_mib": gpu_mib, "mem_fraction_static": fraction, "cow_budget_gib": round(budget / GIB, 2),
             "state_mib_per_request": round(state / MIB, 2), "prefill_max_requests": limit}
    return PrefillChoice(limit, f"{mamba_strategy(engine)} copies the mamba state of each request admitted on a cached "
                     f"prefix, a prefill batch at once: {limit} admissions of {sizes['state_mib_per_request']} MiB "
                     f"(x{COW_STATES_PER_REQUEST}) fit the {sizes['cow_budget_gib']} GiB budgeted outside "
                     "mem_fraction_static", sizes)
