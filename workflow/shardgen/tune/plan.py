"""What a `shardgen tune` folder measures: the grid of settings around the user's current ones, the seeded prompt
sample, and plan.json, fixed on the first call so that every later call measures the same thing."""

import json
import logging
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from shardgen.store import db
from shardgen.store.atomic import committed, write_text
from shardgen.config import Config, ConfigError
from shardgen.engines.registry import backend
from shardgen.layout import Layout, TuneLayout

log = logging.getLogger(__name__)
PLAN_KEYS = ("sample", "seed", "max_new_tokens", "ignore_eos", "caps", "bf16_state")


def grid(engine: dict, caps: list[int], bf16_state: bool) -> dict[str, dict]:
    """The settings measured around the user's current ones: the backend's own grid (`Tunable.tune_grid`)."""
    chosen = backend(engine["backend"])
    if not hasattr(chosen, "tune_grid"):
        raise ConfigError(f"shardgen tune measures a grid of the backend's own settings, and engine.backend "
                          f"{engine['backend']} has none")
    return chosen.tune_grid(engine, caps, bf16_state)


def in_todays_keys(plan: dict) -> dict:
    """A plan read back with its config and settings in today's keys (one written before engine keys were renamed
    is read as it was meant: shardgen.engines' settings modules move old spellings)."""
    config = Config.from_dict(plan["config"])
    settings = {name: config.with_engine(engine).engine.as_dict() for name, engine in plan["settings"].items()}
    return {**plan, "config": config.raw, "settings": settings}


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
        plan = in_todays_keys(json.loads(path.read_text()))
        if changed := [k for k in PLAN_KEYS if plan[k] != options[k]]:
            raise ConfigError(f"{tune_dir} holds a tune run with different {', '.join(changed)} "
                              f"({', '.join(f'{k}={plan[k]!r}' for k in changed)}); pass those, or --out elsewhere")
        if Config.from_dict(plan["config"]).engine != config.engine:
            log.warning("the config's engine section changed since %s began; its settings are kept (the grid is "
                        "compared on one plan): pass --out for a tune run from the new settings", tune_dir)
        return plan
    settings = grid(config.engine.as_dict(), options["caps"], options["bf16_state"])
    rows = write_sample(Layout(config.results).prompts, TuneLayout(tune_dir).sample, options["sample"], options["seed"])
    plan = {**options, "sample_rows": rows, "config": config.raw, "settings": settings}
    write_text(json.dumps(plan, indent=1), path)
    return plan


def pending(plan: dict, tune_dir: Path, only: list[str] | None) -> list[str]:
    names = only or list(plan["settings"])
    if unknown := [n for n in names if n not in plan["settings"]]:
        raise ConfigError(f"--settings: unknown {unknown}; this tune run has {list(plan['settings'])}")
    return [n for n in names if not TuneLayout(tune_dir).result(n).exists()]
