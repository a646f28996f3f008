"""The workflow configuration as typed, frozen sections, validated once (shardgen.config_schema) and resolved."""

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from shardgen.atomic import write_text
from shardgen.config_schema import ConfigError, schema, validate
from shardgen.config_sections import (CheckpointConfig, EngineConfig, ExportsConfig, HardwareConfig, ModelConfig,
                                      PromptsConfig, SamplingDefaults, SourceConfig, build)

__all__ = ["CONFIG_ENV", "Config", "ConfigError", "results_dir_of"]
CONFIG_ENV = "SHARDGEN_CONFIG"


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
    results_dir: str
    model: ModelConfig
    engine: EngineConfig
    hardware: HardwareConfig
    gpus: int
    shards: int | None
    checkpoint: CheckpointConfig
    prompts: PromptsConfig
    defaults: SamplingDefaults
    exports: ExportsConfig
    seed: int
    sources: tuple[SourceConfig, ...]
    raw: dict = field(repr=False, compare=False)  # the validated dict: what the resolved file and plans record

    @classmethod
    def from_dict(cls, raw: dict) -> "Config":
        raw = validate(json.loads(json.dumps(raw)))
        return build(cls, {**raw, "raw": raw})

    @classmethod
    def from_file(cls, path: str | Path) -> "Config":
        path = Path(path)
        loader = json.loads if path.suffix == ".json" else yaml.safe_load
        return cls.from_dict(loader(path.read_text()))

    @property
    def results(self) -> Path:
        return Path(self.results_dir)

    @property
    def n_shards(self) -> int:
        if self.shards:
            return self.shards
        return self.engines if self.gpus else 1

    @property
    def engines(self) -> int:
        """Engines the node runs at once: one per engine.gpus_per_engine GPUs, at least one."""
        return max(1, self.gpus // self.engine.gpus_per_engine)

    def with_engine(self, engine: dict) -> "Config":
        return Config.from_dict({**self.raw, "engine": engine})

    def sampling_for(self, source: SourceConfig) -> dict:
        return source.sampling_over(self.defaults)

    def template_kwargs_for(self, source: SourceConfig) -> dict:
        return source.template_kwargs(self.defaults)

    def sampling_extra(self, source: SourceConfig) -> str:
        return source.sampling_extra(self.defaults)

    def gen_settings(self, source: SourceConfig) -> dict:
        return source.gen_settings(self.defaults)

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
