"""The workflow configuration as typed, frozen sections, validated once (shardgen.config.schema) and resolved."""

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import yaml

from shardgen.store.atomic import write_text
from shardgen.config.schema import ConfigError, validate
from shardgen.engines.registry import check_sampling
from shardgen.capture import HiddenCapture
from shardgen.config.sections import (CaptureConfig, CheckpointConfig, EngineConfig, ExportsConfig, HardwareConfig,
                                      ModelConfig, PromptsConfig, SamplingDefaults, SourceConfig, build)
from shardgen.layout import Layout
from shardgen.sampling import GENERATION_CONFIG

__all__ = ["CONFIG_ENV", "DEFAULT_CONFIG", "Config", "ConfigError", "complete_config", "config_path", "read_file",
           "results_dir_of"]
CONFIG_ENV = "SHARDGEN_CONFIG"
DEFAULT_CONFIG = Path("config/config.yaml")  # the Snakefile's `configfile:`, what a bare `snakemake` reads


def config_path(given: str | None) -> Path | None:
    """The config a command reads: the one given, else $SHARDGEN_CONFIG (set by the workflow for its steps), else
    the workflow's own config/config.yaml when run from the workflow's folder, as `snakemake` would."""
    if given or os.environ.get(CONFIG_ENV):
        return Path(given or os.environ[CONFIG_ENV])
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def read_file(path: Path) -> dict:
    loader = json.loads if path.suffix == ".json" else yaml.safe_load
    try:
        raw = loader(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    return {} if raw is None else raw


def results_dir_of(path: Path) -> Path:
    """The results folder a config file names (or the schema's default). The file may be an overlay that holds a
    few keys (the read-only commands need only this one), but every key it holds is validated as a workflow run
    validates it: a typo fails here too, with the same message."""
    raw = validate(read_file(path), overlay=True)
    return Path(raw["results_dir"])


def complete_config(path: Path) -> "Config | None":
    """The whole config a file holds, or None when it is an overlay that leaves out required keys (a command that
    can do without then asks for what it misses); a key it gives that is unknown or mistyped fails either way."""
    raw = read_file(path)
    validate(json.loads(json.dumps(raw)), overlay=True)
    try:
        validate(json.loads(json.dumps(raw)))
    except ConfigError:  # only a required key can be missing once the overlay's own keys passed
        return None
    return Config.from_dict(raw)


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
    capture: CaptureConfig
    seed: int
    sources: tuple[SourceConfig, ...]
    raw: dict = field(repr=False, compare=False)  # the validated dict: what the resolved file and plans record

    @cached_property
    def target_model(self):
        """The target's tokenizer, template, stop ids and hashes (model.target.ModelInfo), loaded once per config:
        a step that checks, merges and describes the prompt set asks it several times, and each load reads the
        tokenizer and hashes the weights."""
        from shardgen.layout import Layout
        from shardgen.model.target import ModelInfo

        return ModelInfo.from_config(self.model, Layout(self.results).model_cache)

    @classmethod
    def from_dict(cls, raw: dict) -> "Config":
        raw = validate(json.loads(json.dumps(raw)))
        config = build(cls, {**raw, "raw": raw})
        config._check_sampling_applies()
        return config

    def _check_sampling_applies(self) -> None:
        """Every sampling value the config writes is one engine.backend can apply (the backend registry's
        applies_sampling)."""
        check_sampling(self.engine.backend, self.defaults.as_dict(), "defaults")
        if self.engine.backend == "sglang" and self.engine.tp_size > 1 and HiddenCapture.of(self):
            # SGLang fuses the norms the hooks read with the all-reduce (engines/sglang/hidden.py)
            raise ConfigError(f"capture.hidden_states: the sglang backend captures on one GPU per engine (engine."
                              f"tp_size 1, not {self.engine.tp_size}); turn it off or set engine.tp_size 1")
        for i, source in enumerate(self.sources):
            check_sampling(self.engine.backend, source.sampling.as_dict(), f"sources[{i}].sampling")

    @classmethod
    def from_file(cls, path: str | Path) -> "Config":
        return cls.from_dict(read_file(Path(path)))

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

    def with_engine(self, section: dict) -> "Config":
        """This config with an engine section spelled as a file spells it (a tune plan's settings), validated with
        the rest as where a config is read."""
        return Config.from_dict({**self.raw, "engine": section})

    def with_engine_config(self, engine: EngineConfig) -> "Config":
        """This config with a typed engine section (a restart's `Backend.after_oom`: a replace on the frozen section
        of this config, whose values were validated where it was read): nothing is validated again. `raw` (what
        the resolved file and plans record) holds the same values."""
        return replace(self, engine=engine, raw={**self.raw, "engine": {**self.raw["engine"], **engine.as_dict()}})

    def sampling_for(self, source: SourceConfig, served: dict) -> dict:
        """`served`: the model's sampling as served (model.target.ModelInfo.served_sampling); a value of it that the
        config leaves in place is one engine.backend must apply too."""
        values, origins = source.sampling_over(self.defaults, served), self.sampling_origins(source, served)
        from_model = {k: v for k, v in values.items() if origins.get(k) == "generation_config"}
        check_sampling(self.engine.backend, from_model, f"the model's {GENERATION_CONFIG}")
        return values

    def sampling_origins(self, source: SourceConfig, served: dict) -> dict:
        return source.sampling_origins(self.defaults, served)

    def template_kwargs_for(self, source: SourceConfig) -> dict:
        return source.template_kwargs(self.defaults)

    def sampling_extra(self, source: SourceConfig) -> str:
        return source.sampling_extra(self.defaults)

    def gen_settings(self, source: SourceConfig, served: dict) -> dict:
        return source.gen_settings(self.defaults, served)

    def write_resolved(self) -> Path:
        """Write the resolved config for the CLI steps, named by its content: a run's jobs keep reading their own
        even when another snakemake call (a dry run, another config) writes its own meanwhile."""
        text = json.dumps(self.raw, indent=1, sort_keys=True)
        path = Layout(self.results).resolved_config(hashlib.sha256(text.encode()).hexdigest()[:16])
        if not path.exists():
            write_text(text, path)
        return path

    def export_for_jobs(self) -> Path:
        """Write the resolved config and name it in SHARDGEN_CONFIG, which every job's `shardgen` step inherits."""
        path = self.write_resolved().resolve()
        os.environ[CONFIG_ENV] = str(path)
        return path
