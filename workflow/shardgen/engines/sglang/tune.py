"""What `shardgen tune` varies on SGLang: the hybrid-Mamba memory layout (the strategy, the mamba pool's share, the
running cap and the CUDA-graph limit) around the user's current settings. Settings are EngineConfig.as_dict()s."""

from shardgen.engines.sglang.args import MEMORY_LAYOUT_ARGS

POOLED_RATIO, POOLED_GRAPHS = 8.0, 512  # a mamba pool ~1.9x the default one, decode graphs up to the batch it allows


def grid(engine: dict, caps: list[int], bf16_state: bool) -> dict[str, dict]:
    """The user's current engine settings, then the hybrid variants; a variant equal to the current one is dropped.
    Each variant decides the memory-layout arguments for itself; the user's other engine.args stay as they are."""
    base = {**engine, "max_running_requests": None,
            "args": {k: v for k, v in engine["args"].items() if k not in MEMORY_LAYOUT_ARGS}}

    def variant(strategy: str, cap: int | None = None, **args) -> dict:
        return {**base, "sglang": {**base["sglang"], "mamba_strategy": strategy}, "max_running_requests": cap,
                "args": {**base["args"], **args}}

    settings = {"no_buffer": variant("no_buffer"), "extra_buffer": variant("extra_buffer"),
                f"no_buffer_ratio{POOLED_RATIO:g}_graphs{POOLED_GRAPHS}": variant(
                    "no_buffer", mamba_full_memory_ratio=POOLED_RATIO, cuda_graph_max_bs=POOLED_GRAPHS)}
    settings.update({f"no_radix_{cap}": variant("no_radix", cap) for cap in caps})
    if bf16_state:  # half the state memory per request; a numerics trade-off the fragment points out
        settings[f"no_radix_{max(caps)}_bf16"] = variant("no_radix", max(caps), mamba_ssm_dtype="bfloat16")
    return {"current": engine, **{name: s for name, s in settings.items() if s != engine}}
