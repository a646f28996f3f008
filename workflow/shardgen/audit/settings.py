"""The settings `shardgen audit` scores under: the run's own config (`own`), and each `--against` text applied over
it: `dotted.config.key=value` (the value read as YAML), several keys joined by commas for one setting
(`engine.backend=transformers,gpus=0`). Each is validated as a whole config, so a mistyped key fails before any
engine starts, naming it."""

import copy
import re

import yaml

from shardgen.config import Config, ConfigError
from shardgen.engines.registry import backend

OWN = "own"
KEY = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*")
# A comma starts the next key only where `key=` follows it: a YAML value may hold commas ({a: 1, b: 2}).
NEXT_KEY = re.compile(r",(?=\s*[A-Za-z_][\w.-]*\s*=)")
EXAMPLE = "e.g. engine.args.kv_cache_dtype=fp8_e4m3, or engine.backend=transformers,gpus=0"


def parse(text: str) -> dict:
    """dotted key -> value of one setting's text."""
    overrides = {}
    for item in NEXT_KEY.split(text):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not KEY.fullmatch(key) or not value:
            raise ConfigError(f"--against {text!r}: {item.strip()!r} is not dotted.config.key=value ({EXAMPLE})")
        try:
            overrides[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ConfigError(f"--against {text!r}: the value of {key} is not YAML: {err}") from None
    return overrides


def applied(raw: dict, overrides: dict) -> dict:
    """The validated config dict with the overrides laid over it. A setting that switches engine.backend leaves the
    run's engine.args behind (they are the other backend's argument names): only the args it sets go with it."""
    raw = copy.deepcopy(raw)
    if overrides.get("engine.backend", raw["engine"]["backend"]) != raw["engine"]["backend"]:
        raw["engine"]["args"] = {}
    for key, value in overrides.items():
        *sections, leaf = key.split(".")
        node = raw
        for i, name in enumerate(sections):
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{'.'.join(sections[:i + 1])} is a value, not a section: {key} cannot be set")
        node[leaf] = value
    return raw


def setting_config(config: Config, text: str) -> Config:
    overrides = parse(text)
    try:
        return Config.from_dict(applied(config.raw, overrides))
    except ConfigError as err:
        raise ConfigError(f"--against {text!r}: {err}") from None


def plan_settings(config: Config, against: list[str]) -> list[dict]:
    """`own` and each setting: its name (its text), its whole config, and what in its engine settings changes the
    model's numerics by its backend's rule (`shardgen tune`'s numerics_change), which the audit then measures."""
    configs = {OWN: config, **{text: setting_config(config, text) for text in against}}
    if len(configs) != len(against) + 1:
        raise ConfigError(f"--against: a setting is named twice, or named `{OWN}` ({against})")
    return [{"name": name, "config": c.raw, "numerics_change": _numerics_change(c)} for name, c in configs.items()]


def _numerics_change(config: Config) -> str | None:
    changes = backend(config.engine.backend).numerics_changes(config.engine.as_dict(), config.model.path)
    return "; ".join(changes) or None
