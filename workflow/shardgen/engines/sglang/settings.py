"""SGLang's own settings in the configuration: the `engine.sglang` section (validated by its schema here) and the
old spellings of keys that now live elsewhere, still read. Light on purpose: config validation imports it, and
must not import SGLang.

Old spelling -> today's key (a warning says so each time a file uses it):
- `engine.mem_fraction_static` -> `engine.memory_share`, `engine.mamba_strategy` -> `engine.sglang.mamba_strategy`.
  Where the merged config gives both, the old spelling's value wins unless today's key holds something other than
  its default: a user's old overlay laid over the shipped config/config.yaml (which writes today's keys at their
  defaults) keeps its choice, and a tune fragment written in today's keys laid over an old config keeps the
  fragment's.
- `engine.args` `tp_size`, `dp_size`, `mem_fraction_static` -> `engine.tp_size`, `dp_size`, `memory_share`. These
  won over the engine keys when engine.args reached SGLang as written, so they still do."""

import dataclasses
from typing import Any

from shardgen.engines.registry import DEFAULT_BACKEND

STRATEGIES = ("no_buffer", "extra_buffer", "extra_buffer_lazy", "no_radix", "auto")
SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "default": {},
    "properties": {
        "mamba_strategy": {
            "description": "`auto` chooses per run from its prompts: `no_radix` (one Mamba-state slot a request, the "
            "running cap sized from memory) for independent single turns, a prefix cache (`no_buffer`) for "
            "`each_turn` conversations or prompts sharing a long prefix; logged and recorded in the done file "
            "(`engine.mamba_strategy_auto`). `no_buffer`, `extra_buffer`, `extra_buffer_lazy` or `no_radix` fix it "
            "(what each costs: docs/performance.md). Under a prefix cache the requests one prefill batch "
            "admits are bounded so their state copies fit (`engine.prefill_limit_auto`) unless `engine.args` sets "
            "`prefill_max_requests`. Also read from `engine.mamba_strategy`",
            "type": "string", "enum": list(STRATEGIES), "default": "auto"},
    },
}
RENAMED = {"mem_fraction_static": ("memory_share",), "mamba_strategy": ("sglang", "mamba_strategy")}
LIFTED_ARGS = {"tp_size": "tp_size", "dp_size": "dp_size", "mem_fraction_static": "memory_share"}


def upgrade(engine: dict) -> list[str]:
    notes = []
    for old, new in RENAMED.items():
        if old not in engine:
            continue
        value, *parents = engine.pop(old), *new[:-1]
        target = engine
        for key in parents:
            target = target.setdefault(key, {})
        if target.get(new[-1], _default(new)) == _default(new):
            target[new[-1]] = value
            notes.append(f"engine.{old} is now engine.{'.'.join(new)}")
        else:
            notes.append(f"engine.{old} ({value}) is now engine.{'.'.join(new)}, which is set too "
                         f"({target[new[-1]]}): that one is used")
    args = engine.get("args")
    if engine.get("backend", DEFAULT_BACKEND) == "sglang" and isinstance(args, dict):
        for old, lifted in LIFTED_ARGS.items():
            if old in args:
                engine[lifted] = args.pop(old)
                notes.append(f"engine.args.{old} is now engine.{lifted}")
    return notes


def mamba_strategy(engine) -> str:
    """An SGLang EngineConfig's engine.sglang.mamba_strategy."""
    return engine.backend_settings["mamba_strategy"]


def with_mamba_strategy(engine, strategy: str):
    """The EngineConfig with this mamba_strategy (`auto` resolved)."""
    return dataclasses.replace(engine, backend_settings={**engine.backend_settings, "mamba_strategy": strategy})


def _default(key: tuple[str, ...]):
    """Today's key's default: the schema's (engine.sglang's here, the rest in the config schema)."""
    if key[0] == "sglang":
        return SCHEMA["properties"][key[1]]["default"]
    from shardgen.config.schema import schema  # it imports this module's package; cached: read once a process

    return schema()["properties"]["engine"]["properties"][key[0]]["default"]
