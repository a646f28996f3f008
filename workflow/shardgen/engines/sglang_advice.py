"""Advice of `shardgen diagnose` that names a setting only SGLang has, kept beside the backend that owns the name:
the report's rules say the rest in shardgen's neutral keys (engine.max_running_requests, engine.memory_share)."""


def prefix_cache_off(slots_per_request: int | None) -> str:
    """Turning the prefix cache off, for prompts that share no prefix: the cache then only costs state slots."""
    held = f" against the {slots_per_request} it holds now" if slots_per_request and slots_per_request > 1 else ""
    return (f"if the prompts share no prefix, turn the cache off: engine.sglang.mamba_strategy: no_radix (one "
            f"mamba-state slot a request{held}, so more run at once; `auto` chooses it for independent single turns)")
