"""SGLang's answers to `shardgen diagnose` (engines/advice.py): its start-up facts as Pools, and for each bound the
diagnosis finds, the settings only SGLang has that would lift it (engine.args' server arguments, engine.sglang)."""

from collections.abc import Callable

from shardgen.engines.advice import Bound, Pools
from shardgen.engines.sglang.versions import GRAPH_LIMIT_FIELDS

GRAPH_LIMIT_NAMES = tuple(reversed(GRAPH_LIMIT_FIELDS))  # oldest first: the name most configs still write
PREFIX_CACHE_OFF = "engine.sglang.mamba_strategy: no_radix"
STATE_IN_BFLOAT16 = "mamba_ssm_dtype: bfloat16"


def pools(startup: dict) -> Pools:
    """log_lines.parse_startup's facts: the KV pool's tokens and GB, the Mamba state pool's slots and GB."""
    return Pools(kv_tokens=startup.get("kv_pool_tokens"), kv_gb=startup.get("kv_pool_gb"),
                 mamba_slots=startup.get("max_mamba_cache_size"), mamba_gb=startup.get("mamba_pool_gb"))


def prefix_cache_off(slots_per_request: int | None) -> str:
    """Turning the prefix cache off, for prompts that share no prefix: the cache then only costs state slots."""
    held = f" against the {slots_per_request} it holds now" if slots_per_request and slots_per_request > 1 else ""
    return (f"if the prompts share no prefix, turn the cache off: {PREFIX_CACHE_OFF} (one "
            f"mamba-state slot a request{held}, so more run at once; `auto` chooses it for independent single turns)")


def _graph_limit(bound: Bound) -> list[str]:
    return [f"raise the CUDA-graph decode limit to {bound.running} (engine.args: {' or '.join(GRAPH_LIMIT_NAMES)}); "
            "shardgen does it when engine.max_running_requests is set"]


def _running_cap(bound: Bound) -> list[str]:
    now = f" (now {bound.graph_limit})" if bound.graph_limit else ""
    return [f"raise the CUDA-graph decode limit with it ({' / '.join(GRAPH_LIMIT_NAMES)}{now}); shardgen does it "
            "when engine.max_running_requests is set"]


def _mamba_pool(bound: Bound) -> list[str]:
    """One slot a request with the prefix cache off: the pool's slots are the cap it allows."""
    slots = bound.pools.mamba_slots
    return [f"{PREFIX_CACHE_OFF} (1 slot per request, overlap scheduling kept): up to {slots} running",
            f"max_running_requests: {slots} with the graph limit raised to match",
            f"or a larger mamba pool: engine.args mamba_full_memory_ratio, or {STATE_IN_BFLOAT16}"]


def _kv_admission(bound: Bound) -> list[str]:
    if not bound.pools.mamba_gb:
        return []
    return [f"the mamba pool takes {bound.pools.mamba_gb} GB: {STATE_IN_BFLOAT16} halves it and leaves the rest to KV"]


def _compute(bound: Bound) -> list[str]:
    if bound.mamba_state_dtype != "float32":
        return []
    return [f"a cheaper step helps: {STATE_IN_BFLOAT16} halves the state traffic"]


ANSWERS: dict[str, Callable[[Bound], list[str]]] = {  # one for each of advice.BOUNDS
    "graph_limit": _graph_limit,
    "running_cap": _running_cap,
    "mamba_pool": _mamba_pool,
    "kv_at_cap": lambda bound: ["a smaller mamba share (mamba_full_memory_ratio) leaves more KV"],
    "kv_admission": _kv_admission,
    "compute": _compute,
    "prefill": lambda bound: ["a larger chunked_prefill_size / max_prefill_tokens batches prefill better"],
    "prefix_cache_unused": lambda bound: [prefix_cache_off(bound.mamba_slots_per_request)],
    "prefix_cache_kept": lambda bound: [f"with shared prefixes, keep the prefix cache on (not {PREFIX_CACHE_OFF})"],
}


def advice(bound: Bound) -> list[str]:
    return ANSWERS[bound.code](bound)
