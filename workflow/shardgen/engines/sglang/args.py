"""Map shardgen's engine config onto the installed SGLang's ServerArgs fields, under the names of its version
(versions.py), and refuse an argument SGLang does not know before any engine starts; and read those fields back
from a log's ServerArgs line or a run's resolved arguments, under either name."""

import difflib
import re

from shardgen.config import ConfigError
from shardgen.config.sections import EngineConfig
from shardgen.engines import RunSettings
from shardgen.engines.sglang.settings import mamba_strategy
from shardgen.engines.sglang.versions import GRAPH_LIMIT_FIELDS, STRATEGY_FIELDS, Spelling, spelling, translate

SLOTS_PER_REQUEST = {"no_buffer": 3, "extra_buffer": 5, "extra_buffer_lazy": 4, "no_radix": 1}  # mamba pool slots
# The engine.args that decide how GPU memory is split between the KV cache and the mamba state pool, and the
# largest decode batch with CUDA graphs (every spelling): what `shardgen tune` varies.
MEMORY_LAYOUT_ARGS = frozenset({"mamba_full_memory_ratio", "max_mamba_cache_size", "mamba_ssm_dtype",
                                "disable_radix_cache", "disable_overlap_schedule", *STRATEGY_FIELDS,
                                *GRAPH_LIMIT_FIELDS})
# The ServerArgs fields `shardgen diagnose` reads off a log: the memory layout, graph limit and dtypes.
LOGGED_FIELDS = ("disable_radix_cache", *STRATEGY_FIELDS, *GRAPH_LIMIT_FIELDS, "disable_overlap_schedule",
                 "mamba_ssm_dtype", "kv_cache_dtype", "dtype")
_LOGGED = re.compile(rf"\b({'|'.join(LOGGED_FIELDS)})=('?)([\w.]+)\2[,)]")


def server_arg_names(server_args_class) -> set[str]:
    """Field names of SGLang's ServerArgs: a dataclass up to 0.5.17, a msgspec struct later."""
    if fields := getattr(server_args_class, "__dataclass_fields__", None):
        return set(fields)
    if fields := getattr(server_args_class, "__struct_fields__", None):
        return set(fields)
    raise TypeError(f"cannot read the fields of {server_args_class!r}")


def _strategy_args(strategy: str, names: Spelling) -> dict:
    if strategy == "auto":  # shardgen's auto is resolved from the work first; SGLang's own `auto` is another rule
        raise ValueError("mamba_strategy auto reaches the server args unresolved (mamba_auto.resolve comes first)")
    if strategy == "no_radix":  # 1 mamba slot per request; overlap scheduling stays on; no strategy applies
        return {"disable_radix_cache": True}
    args: dict[str, str | bool] = {names.mamba_strategy: strategy}
    if strategy == "no_buffer" and names.no_buffer_overlap_off:
        args["disable_overlap_schedule"] = True
    return args


def build_server_args(engine: EngineConfig, model_path: str, fields: set[str], version: str | None, seed: int,
                      trust_remote_code: bool) -> dict:
    """Engine(**kwargs) for these engine settings on the SGLang `version` whose ServerArgs has `fields`."""
    names = spelling(version)
    args = {"model_path": model_path, "tp_size": engine.tp_size, "mem_fraction_static": engine.memory_share,
            "random_seed": seed, "trust_remote_code": trust_remote_code, "log_level": "info"}
    if engine.dp_size > 1:  # left out at 1, SGLang's default: the done record's server_args stay as they were
        args["dp_size"] = engine.dp_size
    args.update(_strategy_args(mamba_strategy(engine), names))
    if (cap := engine.max_running_requests) is not None:
        args["max_running_requests"] = cap
        args[names.graph_limit] = cap  # decode batches above the graph limit run without CUDA graphs
    # Users write either version's spelling of a renamed field: it reaches SGLang under this version's.
    args.update(entry for key, value in engine.args.items() if (entry := translate(key, value, names, version)))
    check_known(args, fields, version)
    return args


def check_known(args: dict, fields: set[str], version: str | None) -> None:
    unknown = sorted(k for k in args if k not in fields)
    if unknown:
        hints = "; ".join(f"{k!r} (closest: {', '.join(difflib.get_close_matches(k, fields, 3, 0.5)) or 'none'})"
                          for k in unknown)
        raise ConfigError(f"engine.args: the installed SGLang{f' {version}' if version else ''} does not know {hints}")


def logged_server_args(line: str) -> dict | None:
    """The LOGGED_FIELDS of a `server_args=ServerArgs(...)` log line, as the strings logged; None for another line."""
    if "server_args=ServerArgs(" not in line:
        return None
    return {m[0]: m[2] for m in _LOGGED.findall(line)}


def _mamba_strategy(args: dict) -> str | None:
    if args.get("disable_radix_cache") in ("True", True):
        return "no_radix"
    return next((str(args[f]) for f in STRATEGY_FIELDS if args.get(f)), None)


def _graph_limit(args: dict) -> int | None:
    value = next((args[f] for f in GRAPH_LIMIT_FIELDS if args.get(f)), None)
    return int(value) if value not in (None, "None") else None


def _dtype(value) -> str | None:
    """A logged or resolved dtype as a plain name; None where SGLang picks (`auto`, unset)."""
    if value in (None, "None", "auto"):
        return None
    return str(value).strip("'\"").removeprefix("torch.")


def run_settings(args: dict) -> RunSettings:
    """The engine-neutral view of logged (strings) or resolved ServerArgs fields, under either version's names."""
    strategy = _mamba_strategy(args)
    slots = None if strategy is None else SLOTS_PER_REQUEST.get(strategy)
    return RunSettings(mamba_strategy=strategy, mamba_slots_per_request=slots,
                       prefix_cache=None if strategy is None else strategy != "no_radix",
                       graph_limit=_graph_limit(args), weights_dtype=_dtype(args.get("dtype")),
                       kv_cache_dtype=_dtype(args.get("kv_cache_dtype")),
                       ssm_state_dtype=_dtype(args.get("mamba_ssm_dtype")),
                       attention_backend=args.get("attention_backend"))


def resolved_value(resolved: dict, key: str):
    """The value an engine ran with for the engine.args key `key`, under whichever spelling its SGLang has."""
    family = next((f for f in (STRATEGY_FIELDS, GRAPH_LIMIT_FIELDS) if key in f), (key,))
    return next((resolved[k] for k in family if k in resolved), None)
