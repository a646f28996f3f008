"""Load, validate and resolve the workflow configuration against workflow/schemas/config.schema.yaml."""

import difflib
import hashlib
import os
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from shardgen import WORKFLOW_DIR, ShardgenError
from shardgen.atomic import write_text

SCHEMA_PATH = WORKFLOW_DIR / "schemas" / "config.schema.yaml"
CONFIG_ENV = "SHARDGEN_CONFIG"


class ConfigError(ShardgenError, ValueError):
    """A configuration problem, named by its key path (e.g. `sources[1].format`)."""


@cache
def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = json.loads(json.dumps(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


DefaultFillingValidator = _with_defaults(jsonschema.Draft202012Validator)


def key_path(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    where = key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        hints = [f"{u!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(u, allowed, 1)) else repr(u)
                 for u in unknown]
        return f"unknown key {', '.join(hints)} in {where}; allowed: {', '.join(allowed)}"
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        return f"{where}: give exactly one of 'path' (a file) or 'dataset' (an HF dataset)"
    return f"{where}: {error.message}"


def validate(raw: dict) -> dict:
    """Fill defaults in place and raise ConfigError naming the first bad key."""
    errors = sorted(DefaultFillingValidator(schema()).iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ConfigError("invalid config: " + "; ".join(_describe(e) for e in errors[:5]))
    names = [s["name"] for s in raw["sources"]]
    if dupes := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"invalid config: sources: duplicate name(s) {dupes}")
    return raw


def results_dir_of(path: Path) -> Path:
    """The results folder a config file names (or the schema's default), without validating the rest: the
    read-only commands need only this, also from an overlay that holds a few keys."""
    loader = json.loads if path.suffix == ".json" else yaml.safe_load
    try:
        raw = loader(path.read_text()) or {}
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path}: expected a mapping of keys at the top level")
    return Path(raw.get("results_dir") or schema()["properties"]["results_dir"]["default"])


@dataclass(frozen=True)
class Config:
    raw: dict

    @classmethod
    def from_dict(cls, raw: dict) -> "Config":
        return cls(validate(json.loads(json.dumps(raw))))

    @classmethod
    def from_file(cls, path: str | Path) -> "Config":
        path = Path(path)
        loader = json.loads if path.suffix == ".json" else yaml.safe_load
        return cls.from_dict(loader(path.read_text()))

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    @property
    def results(self) -> Path:
        return Path(self.raw["results_dir"])

    @property
    def n_shards(self) -> int:
        if self.raw["shards"]:
            return self.raw["shards"]
        gpus = self.raw["gpus"]
        return max(1, gpus // self.raw["engine"]["tp_size"]) if gpus else 1

    def with_engine(self, engine: dict) -> "Config":
        return Config.from_dict({**self.raw, "engine": engine})

    def sampling_for(self, source: dict) -> dict:
        """The source's sampling params over the global defaults."""
        params = {k: v for k, v in self.raw["defaults"].items() if k != "chat_template_kwargs"}
        params.update(source.get("sampling") or {})
        return params

    def template_kwargs_for(self, source: dict) -> dict:
        return {**self.raw["defaults"]["chat_template_kwargs"], **source.get("chat_template_kwargs", {})}

    def sampling_extra(self, source: dict) -> str:
        kwargs = self.template_kwargs_for(source)
        return json.dumps({"chat_template_kwargs": kwargs} if kwargs else {}, sort_keys=True)

    def gen_settings(self, source: dict) -> dict:
        """What enters the gen_key of a source's prompts besides the prompt and the model hashes."""
        return {**self.sampling_for(source), "extra": self.sampling_extra(source)}

    def write_resolved(self) -> Path:
        """Write the resolved config for the CLI steps, named by its content: a run's jobs keep reading their own
        even when another snakemake call (a dry run, another config) writes its own meanwhile."""
        text = json.dumps(self.raw, indent=1, sort_keys=True)
        path = self.results / ".shardgen" / f"config-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        if not path.exists():
            write_text(text, path)
        return path

    def export_for_jobs(self) -> Path:
        """Write the resolved config and name it in SHARDGEN_CONFIG, which every job's `shardgen` step inherits."""
        path = self.write_resolved().resolve()
        os.environ[CONFIG_ENV] = str(path)
        return path
