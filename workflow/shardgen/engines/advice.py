"""What `shardgen diagnose` asks a backend, in no backend's words: its start-up pools (`Advising.pools`) and, for a
bound it found, the settings of the backend's own that would lift it (`Advising.advice`). The report names only
shardgen's neutral keys (engine.max_running_requests, engine.memory_share, engine.inflight); a setting only one
backend has is that backend's to name, as the reading of its log is (`Backend.read_log_line`)."""

from dataclasses import dataclass
from typing import Protocol

# The bounds the diagnosis asks about (Bound.code), each with the finding it is asked for.
BOUNDS = {
    "graph_limit": "cuda_graph_uncovered: decode batches of up to `running` requests ran without CUDA graphs",
    "running_cap": "running_cap_bound: the user's running cap limits the run, and is to be raised",
    "mamba_pool": "mamba_pool_bound: the Mamba state pool's slots set the running cap, with KV to spare",
    "kv_at_cap": "kv_bound: the KV pool is full at the running cap",
    "kv_admission": "kv_bound: the KV pool admits no more requests below the running cap",
    "compute": "compute_saturated: decode throughput no longer grows with the running requests",
    "prefill": "prefill_heavy: prefill, not decode, takes most of the GPU",
    "prefix_cache_unused": "prefill_heavy: the prefix cache is on but serves little: how to turn it off",
    "prefix_cache_kept": "prefill_heavy: how to keep the prefix cache on, for prompts that share prefixes",
}


@dataclass(frozen=True)
class Pools:
    """The pools an engine sized at start-up (EngineInfo.startup, a log's start-up lines); None: not reported."""
    kv_tokens: int | None = None
    kv_gb: float | None = None
    mamba_slots: int | None = None  # a hybrid model's Mamba state pool: slots, RunSettings.mamba_slots_per_request each
    mamba_gb: float | None = None


@dataclass(frozen=True)
class Bound:
    """A bound the diagnosis found (`code`, one of BOUNDS) and what advice on lifting it may read."""
    code: str
    pools: Pools = Pools()
    running: int | None = None  # graph_limit: the largest decode batch that ran without CUDA graphs
    graph_limit: int | None = None  # RunSettings.graph_limit
    mamba_slots_per_request: int | None = None  # RunSettings.mamba_slots_per_request
    mamba_state_dtype: str | None = None  # compute: the Mamba state's dtype, where the model has Mamba layers


class Advising(Protocol):
    """Part of every `Backend`: what `shardgen diagnose` asks of the backend whose run it reads."""

    @classmethod
    def pools(cls, startup: dict) -> Pools:
        """The start-up facts this backend's log reading gives (LogLine.facts, EngineInfo.startup) as Pools."""

    @classmethod
    def advice(cls, bound: Bound) -> list[str]:
        """The settings of this backend's own that would lift `bound`, one line each (each BOUNDS code has its
        lines, or none)."""


class NoAdvice:
    """The Advising of a backend with no pools, CUDA graphs or settings of its own to name (the CPU engine): the
    neutral keys the report names are all there is to change."""

    @classmethod
    def pools(cls, startup: dict) -> Pools:
        return Pools()

    @classmethod
    def advice(cls, bound: Bound) -> list[str]:
        return []
