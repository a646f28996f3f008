"""The done file's `engine` section an SGLang run writes, read without an engine: the server's resolved settings it
keeps, its EngineInfo in neutral names, what it ran with for an engine.args key, and its numerics (the dtypes that
decide the numbers), with what in a config's settings would change them."""

import json
from pathlib import Path

from shardgen.engines import EngineInfo
from shardgen.engines.model_shape import ModelShape
from shardgen.engines.sglang.args import resolved_value, run_settings
from shardgen.engines.sglang.versions import GRAPH_LIMIT_FIELDS, STRATEGY_FIELDS

# What the record keeps of the server's own settings once SGLang resolved them (`resolved`): a contract once written.
RESOLVED_KEYS = ("max_running_requests", "max_total_tokens", "mem_fraction_static", "chunked_prefill_size",
                 "max_prefill_tokens", "disable_radix_cache", "disable_overlap_schedule", *STRATEGY_FIELDS,
                 "mamba_full_memory_ratio", "max_mamba_cache_size", "mamba_ssm_dtype", "kv_cache_dtype", "dtype",
                 *GRAPH_LIMIT_FIELDS, "attention_backend", "page_size", "random_seed", "tp_size", "dp_size",
                 "load_format", "schedule_policy", "version")
SSM_STATE_DEFAULT = "float32"  # SGLang's SSM-state dtype when neither the model's config nor mamba_ssm_dtype sets one


def info_from_record(record: dict) -> EngineInfo:
    return EngineInfo("sglang", record["max_running_requests"], record.get("version"), record.get("gpu_name"),
                      record.get("startup") or {},
                      # what was asked, overridden by what SGLang resolved (dtypes it was not asked about)
                      run_settings({**(record.get("server_args") or {}), **(record.get("resolved") or {})}),
                      record)


def ran_with(record: dict, arg: str):
    """The value the engine of a done record ran with for the engine.args key `arg` (either spelling)."""
    return resolved_value(record.get("resolved") or {}, arg)


def numerics_changes(engine: dict, model_path) -> list[str]:
    """A bfloat16 (or any other) SSM state where the model's config or SGLang's default keeps another, and an
    fp8 KV cache: both change what the model computes, so the data would not be what it serves."""
    config_path = Path(model_path) / "config.json"
    model = json.loads(config_path.read_text()) if config_path.exists() else {}
    args, changes = engine.get("args") or {}, []
    state = args.get("mamba_ssm_dtype")
    native = model.get("mamba_ssm_dtype") or SSM_STATE_DEFAULT
    if state and str(state).removeprefix("torch.") != native:
        changes.append(f"mamba_ssm_dtype {state} (the model's SSM state is {native})")
    if str(args.get("kv_cache_dtype") or "").startswith("fp8"):
        changes.append(f"kv_cache_dtype {args['kv_cache_dtype']} (attention keys and values quantized)")
    return changes


def numerics(record: dict, model_dir: Path) -> dict:
    """The dtypes it ran with (those SGLang was not asked about are the model's own), its version, attention
    kernels and GPU."""
    info = info_from_record(record)
    dtypes = ModelShape.from_dir(model_dir).dtypes(info.settings)
    return {"backend": info.backend, "version": info.version, **dtypes,
            "attention_backend": info.settings.attention_backend, "gpu_name": info.gpu_name}
