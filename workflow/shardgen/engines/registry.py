"""The registry of backends: each registered by the name of its package (`engines/<name>/`: its `engine` module
holds a class that implements `Backend`, constructor signature included; its `settings` module, if it has settings
of its own, is a light module for them, `BackendSettings`: its `engine.<name>` section), its conda env file under
envs/ and the sampling fields it applies. The schema's backend choices, its `engine.<name>` sections and every
rule's env are read from BACKENDS; a backend is imported only when asked for, by its name, and nothing else imports
inside its folder."""

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from shardgen import ConfigError, sampling
from shardgen.engines import Backend, Engine, EngineInfo, recorded_numerics


@dataclass(frozen=True)
class Registration:
    """A backend, found by its name: its package is `shardgen.engines.<name>` (`package`)."""
    # the Backend class in its package's `engine` module: imported on first use (after the GPU lease, never in CI
    # unless asked)
    engine_class: str
    has_settings: bool  # whether its package has a `settings` module (BackendSettings, no heavy imports)
    env: str  # its conda env file under envs/: every rule runs in it with --sdm conda
    # whether it applies a sampling field, known without importing it: a config asking for another fails at once
    applies_sampling: Callable[[sampling.SamplingField], bool]


# SGLang takes these names in a request's sampling params; HF generate takes every key a generation config can set.
SGLANG_SAMPLING = frozenset({"temperature", "top_p", "top_k", "min_p", "repetition_penalty"})
BACKENDS = {
    "sglang": Registration("SGLangEngine", True, "shardgen-gpu.yaml", lambda field: field.name in SGLANG_SAMPLING),
    "transformers": Registration("TransformersEngine", False, "shardgen-cpu.yaml",
                                 lambda field: field.generation_config is not None),
}
DEFAULT_BACKEND = "sglang"  # the schema's default for engine.backend


def check_sampling(backend: str, values: dict, where: str) -> None:
    """Refuse a value of a sampling field `backend` cannot apply (a list: any of its values) away from the field's
    neutral value; at neutral the field changes nothing, and its requests leave it out (request_sampling)."""
    applies = BACKENDS[backend].applies_sampling
    for declared in (f for f in sampling.FIELDS if not applies(f)):
        given = values.get(declared.name)
        if given is not None and any(v != declared.neutral for v in (given if isinstance(given, list) else [given])):
            applied = ", ".join(f.name for f in sampling.FIELDS if applies(f))
            raise ConfigError(f"{where}: {declared.name} {given} cannot be applied by the {backend} backend (it "
                              f"applies {applied}); leave it out, set it to {declared.neutral} (no effect) or pick "
                              "another engine.backend")


def request_sampling(backend: str, values: dict) -> dict:
    """A request's sampling as `backend` takes it: the fields it cannot apply left out (check_sampling let them
    through only at their neutral value). An engine outside the registry (a test's fake) takes them all."""
    left_out = _left_out(BACKENDS[backend]) if backend in BACKENDS else frozenset()
    return {k: v for k, v in values.items() if k not in left_out}


@cache
def _left_out(registration: Registration) -> frozenset[str]:
    """The sampling fields a backend cannot apply, worked out once (request_sampling runs for every request)."""
    return frozenset(f.name for f in sampling.FIELDS if not registration.applies_sampling(f))


def numerics_of(record: dict, model_dir: Path) -> dict:
    """A done record's numerics as its backend reads them (a test's fake engine: by the dtypes its record names)."""
    if record.get("backend") not in BACKENDS:
        return recorded_numerics(record)
    return backend(record["backend"]).numerics(record, model_dir)


def package(name: str) -> str:
    """A registered backend's package: the folder engines/<name>/."""
    return f"{__package__}.{name}"


def backend(name: str) -> type[Backend]:
    """The registered backend class, imported now."""
    if name not in BACKENDS:
        raise ValueError(f"engine.backend: unknown backend {name!r} (registered: {', '.join(BACKENDS)})")
    return getattr(importlib.import_module(f"{package(name)}.engine"), BACKENDS[name].engine_class)


def settings_modules() -> dict:
    """name -> settings module (BackendSettings) of each backend with settings of its own: light, no engine library."""
    return {name: importlib.import_module(f"{package(name)}.settings")
            for name, entry in BACKENDS.items() if entry.has_settings}


def create_engine(config, model, workdir: Path, *, device: str, watchdog=None, extra_sampling: dict | None = None,
                  work: Sequence[dict] = ()) -> Engine:
    return backend(config.engine.backend)(config, model, workdir, device=device, watchdog=watchdog,
                                          extra_sampling=extra_sampling, work=work)


def info_from_record(record: dict) -> EngineInfo:
    """A done file's `engine` section read back by the backend that wrote it."""
    return backend(record["backend"]).info_from_record(record)
