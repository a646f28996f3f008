"""ServerArgs with the field names of SGLang 0.5.13 or 0.5.17 (FAKE_SGLANG_VERSION), the ones that were renamed."""

import dataclasses
import os

VERSION = os.environ.get("FAKE_SGLANG_VERSION", "0.5.13.post1")
_COMMON = [("model_path", str, None), ("tp_size", int, 1), ("dp_size", int, 1), ("mem_fraction_static", float, None),
           ("max_running_requests", int, None), ("random_seed", int, None), ("trust_remote_code", bool, False),
           ("log_level", str, "error"), ("disable_radix_cache", bool, False), ("disable_overlap_schedule", bool, False),
           ("mamba_full_memory_ratio", float, 0.9), ("max_mamba_cache_size", int, None), ("mamba_ssm_dtype", str, None),
           ("attention_backend", str, None), ("load_format", str, "auto"), ("chunked_prefill_size", int, None),
           ("page_size", int, None), ("dtype", str, "auto"), ("decode_log_interval", int, 40)]
_RENAMED = {
    "0.5.13": [("mamba_scheduler_strategy", str, "auto"), ("cuda_graph_max_bs", int, None)],
    "0.5.17": [("mamba_radix_cache_strategy", str, "auto"), ("cuda_graph_max_bs_decode", int, None),
               ("cuda_graph_max_bs_prefill", int, None), ("prefill_max_requests", int, None)],
}
ServerArgs = dataclasses.make_dataclass(
    "ServerArgs", [(n, t, dataclasses.field(default=d)) for n, t, d in _COMMON + _RENAMED[VERSION[:6]]])
