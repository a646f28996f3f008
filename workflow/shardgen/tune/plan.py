"""What a `shardgen tune` folder measures: the grid of settings around the user's current ones, the seeded prompt
sample, and plan.json, fixed on the first call so that every later call measures the same thing."""

import json
import logging
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from shardgen import db
from shardgen.atomic import committed, write_text
from shardgen.config import Config, ConfigError
from shardgen.engines import backend
from shardgen.layout import Layout, TuneLayout

log = logging.getLogger(__name__)
POOLED_RATIO, POOLED_GRAPHS = 8.0, 512  # a mamba pool ~1.9x the default one, decode graphs up to the batch it allows
PLAN_KEYS = ("sample", "seed", "max_new_tokens", "ignore_eos", "caps", "bf16_state")


def grid(engine: dict, caps: list[int], bf16_state: bool) -> dict[str, dict]:
    """The user's current engine settings, then the hybrid variants; a variant equal to the current one is dropped.
    Each variant decides the memory-layout arguments for itself; the user's other engine.args stay as they are."""
    layout_args = backend(engine["backend"]).MEMORY_LAYOUT_ARGS
    base = {**engine, "max_running_requests": None,
            "args": {k: v for k, v in engine["args"].items() if k not in layout_args}}

    def variant(strategy: str, cap: int | None = None, **args) -> dict:
        return {**base, "mamba_strategy": strategy, "max_running_requests": cap, "args": {**base["args"], **args}}

    settings = {"no_buffer": variant("no_buffer"), "extra_buffer": variant("extra_buffer"),
                f"no_buffer_ratio{POOLED_RATIO:g}_graphs{POOLED_GRAPHS}": variant(
                    "no_buffer", mamba_full_memory_ratio=POOLED_RATIO, cuda_graph_max_bs=POOLED_GRAPHS)}
    settings.update({f"no_radix_{cap}": variant("no_radix", cap) for cap in caps})
    if bf16_state:  # half the state memory per request; a numerics trade-off the fragment points out
        settings[f"no_radix_{max(caps)}_bf16"] = variant("no_radix", max(caps), mamba_ssm_dtype="bfloat16")
    return {"current": engine, **{name: s for name, s in settings.items() if s != engine}}


def write_sample(prompts: Path, out: Path, n: int, seed: int) -> int:
    """A seeded sample of the prompt set (the same rows whatever the thread count), kept so every setting gets it."""
    if not prompts.exists():
        raise ConfigError(f"shardgen tune samples the prompt set, and {prompts} does not exist yet: run "
                          f"`snakemake {prompts}` first")
    with committed(out) as tmp:
        duckdb.sql(f"COPY (SELECT * FROM read_parquet({db.quote(prompts)}) ORDER BY hash(gen_key, {int(seed)}), "
                   f"gen_key LIMIT {int(n)}) TO {db.quote(tmp)} (FORMAT parquet)")
    return pq.read_metadata(out).num_rows


def load_plan(config: Config, tune_dir: Path, options: dict) -> dict:
    """The plan of this tune folder, made on its first call; later calls must ask for the same measurement."""
    path = TuneLayout(tune_dir).plan
    if path.exists():
        plan = json.loads(path.read_text())
        if changed := [k for k in PLAN_KEYS if plan[k] != options[k]]:
            raise ConfigError(f"{tune_dir} holds a tune run with different {', '.join(changed)} "
                              f"({', '.join(f'{k}={plan[k]!r}' for k in changed)}); pass those, or --out elsewhere")
        if plan["config"]["engine"] != config.engine.as_dict():
            log.warning("the config's engine section changed since %s began; its settings are kept (the grid is "
                        "compared on one plan): pass --out for a tune run from the new settings", tune_dir)
        return plan
    if config.engine.backend != "sglang":
        raise ConfigError("shardgen tune measures SGLang's hybrid-Mamba settings: engine.backend must be sglang")
    rows = write_sample(Layout(config.results).prompts, TuneLayout(tune_dir).sample, options["sample"], options["seed"])
    plan = {**options, "sample_rows": rows, "config": config.raw,
            "settings": grid(config.engine.as_dict(), options["caps"], options["bf16_state"])}
    write_text(json.dumps(plan, indent=1), path)
    return plan


def pending(plan: dict, tune_dir: Path, only: list[str] | None) -> list[str]:
    names = only or list(plan["settings"])
    if unknown := [n for n in names if n not in plan["settings"]]:
        raise ConfigError(f"--settings: unknown {unknown}; this tune run has {list(plan['settings'])}")
    return [n for n in names if not TuneLayout(tune_dir).result(n).exists()]
