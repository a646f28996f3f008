"""The engine interface every backend implements, and the registry that finds one by name and imports it only
when asked. Callers start one with `session.open_engine`; other stages read an engine's `EngineInfo`, never a
backend's own argument names. A backend is a package here named as it is registered (`engines/<name>/`): its
`engine` module holds a class that implements `Backend` (its constructor signature included), its `settings` module,
if it has settings of its own, a light module for them (`BackendSettings`: its `engine.<name>` section). With its
conda env file under envs/ and one entry in BACKENDS (with the sampling fields it applies), from which the schema's
backend choices, its `engine.<name>` sections and every rule's env are read, that folder is the whole backend: only
the registry imports inside it."""

import importlib
from functools import cache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from shardgen import ConfigError, sampling
from shardgen.engines.advice import Advising
from shardgen.engines.retractions import Retraction
from shardgen.engines.scoring import ScoreRequest, Scores


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


@dataclass
class Request:
    rid: str  # unique per attempt: engines may refuse a reused id
    prompt_ids: list[int]
    sampling: dict  # max_new_tokens and the sampling fields the backend applies (request_sampling)
    source: str | None = None  # its prompt's source: whether it is captured (capture.Capture.wants)


@dataclass
class Result:
    output_ids: list[int]  # stop token included
    text: str
    finish_reason: str  # stop | length | abort
    prompt_tokens: int
    cached_tokens: int = 0
    error: str | None = None
    # Per generated token (shardgen/capture.py): the chosen token's logprob, the top-k ids and logprobs, most likely
    # first; None when not asked (logprobs without top_ids: the signal alone, capture.signal_only).
    logprobs: list[float] | None = None
    top_ids: list[list[int]] | None = None
    top_logprobs: list[list[float]] | None = None
    # capture.HiddenCapture.encode's {states, scale (fp8), layers} over prompt + output; None when not asked
    hidden_states: dict | None = None


@dataclass(frozen=True)
class RunSettings:
    """What an engine ran with, in no backend's argument names: what diagnose, the efficiency and tune read.
    None where the run did not say (a dtype then is the model's own, or the backend's default)."""
    mamba_strategy: str | None = None  # no_buffer | extra_buffer | extra_buffer_lazy | no_radix
    prefix_cache: bool | None = None  # whether a prefix cache served the run's requests (None: not said)
    mamba_slots_per_request: int | None = None  # state-pool slots one running request holds under that strategy
    graph_limit: int | None = None  # the largest decode batch that runs with CUDA graphs
    weights_dtype: str | None = None
    kv_cache_dtype: str | None = None
    ssm_state_dtype: str | None = None
    attention_backend: str | None = None  # the attention kernels: they change the numbers, not only the speed


@dataclass(frozen=True)
class LogLine:
    """What one line of an engine's log says, as its backend reads it (`Backend.read_log_line`)."""
    row: dict | None = None  # a telemetry row (tables.TELEMETRY), for a line that reports a batch
    progress: bool = False  # the engine generated tokens: the watchdog's sign of life between completions
    out_of_memory: bool = False
    retraction: Retraction | None = None  # requests taken back for KV room, to be prefilled again (retractions.py)
    facts: dict = field(default_factory=dict)  # pool sizes reported at start-up (EngineInfo.startup's keys)
    settings: RunSettings | None = None  # the settings a start-up line says the engine runs with


@dataclass(frozen=True)
class EngineInfo:
    """A started engine, as the driver, the done file, diagnose and tune see it.

    Attributes:
        backend: the registered name.
        max_running_requests: what the engine runs at once across all its ranks (data-parallel ones included);
            the driver keeps `engine.inflight` times this in flight.
        version: the backend library's version.
        gpu_name: the device's name (for the peaks table), None without CUDA.
        startup: pool sizes read at start-up (the facts its log lines give: `LogLine.facts`).
        settings: the resolved settings, engine-neutral.
        record: the done file's `engine` section in the backend's own names; its keys are a contract.
    """
    backend: str
    max_running_requests: int
    version: str | None = None
    gpu_name: str | None = None
    startup: dict = field(default_factory=dict)
    settings: RunSettings = RunSettings()
    record: dict = field(default_factory=dict)


class Engine(Protocol):
    info: EngineInfo

    async def generate(self, request: Request) -> Result: ...

    def score(self, requests: list[ScoreRequest], top_k: int) -> list[Scores]:
        """Prefill only (`shardgen audit`): each request's target scored after its context (engines/scoring.py)."""

    def run(self, coro):
        """Run the driver coroutine on the event loop this engine needs."""

    def kill(self) -> None:
        """Kill the engine's whole process tree, this process included (what SGLang does when it fails)."""

    def close(self) -> None: ...


class Backend(Engine, Advising, Protocol):
    """The class a backend module registers: its constructor starts an engine; the class methods need none. What
    `shardgen diagnose` asks it (its pools, its advice) is engines/advice.py's `Advising`."""

    def __init__(self, config, model, workdir: Path, *, device: str, watchdog=None,
                 extra_sampling: dict | None = None, work: Sequence[dict] = ()) -> None:
        """Start an engine for `config.engine` (telemetry under `workdir`). `work`: the prompts it is about to run,
        for settings resolved from them (`mamba_strategy: auto`); `extra_sampling` (ignore_eos) goes with each."""

    @classmethod
    def after_oom(cls, engine, ooms: int, last_cap: int | None):
        """The EngineConfig to restart with after `ooms` out-of-memory deaths in a row; `last_cap` is the running
        cap the engine reported before dying, for a config that left it to the engine."""

    @classmethod
    def info_from_record(cls, record: dict) -> EngineInfo:
        """The EngineInfo of a done file's `engine` section."""

    @classmethod
    def numerics_changes(cls, engine: dict, model_path: str | Path) -> list[str]:
        """What in these engine settings (EngineConfig.as_dict()) makes the engine compute other numbers than the
        model as published would (empty: none)."""

    @classmethod
    def numerics(cls, record: dict, model_dir: Path) -> dict:
        """A done file's `engine` section as the settings that decide the numbers (the provenance's per shard):
        `backend`, and the weights, KV-cache and SSM-state dtypes it ran with."""

    @classmethod
    def read_log_line(cls, line: str) -> LogLine:
        """What one line of this engine's log says: telemetry, start-up facts, progress, out of memory, a
        retraction. The watchdog, the engine's done record and `shardgen diagnose` read a log only through this."""


class Tunable(Protocol):
    """A backend `shardgen tune` can measure (optional: tune refuses a backend without it)."""

    @staticmethod
    def tune_grid(engine: dict, caps: list[int], bf16_state: bool) -> dict[str, dict]:
        """Named engine settings (EngineConfig.as_dict()) to measure, `current` (the user's own) first."""

    @classmethod
    def ran_with(cls, record: dict, arg: str):
        """The value the engine of a done record ran with for the engine.args key `arg` (the fragment's)."""


class BackendSettings(Protocol):
    """The light module a backend registers for the configuration: validation imports it, never the engine."""
    SCHEMA: dict  # the JSON schema of `engine.<name>`: this backend's own settings with their defaults

    def upgrade(self, engine: dict) -> list[str]:
        """Move this backend's old spellings in a raw `engine` section onto today's keys, in place: one line per
        key moved, saying what to write instead."""


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


def recorded_numerics(record: dict) -> dict:
    """The dtypes a done record's engine section names (`dtype`, `kv_cache_dtype`, `ssm_state_dtype`), and a note
    where one is missing: what an engine that records them plainly reports as its numerics."""
    dtypes = {"weights": record.get("dtype"), "kv": record.get("kv_cache_dtype"),
              "ssm_state": record.get("ssm_state_dtype")}
    numerics = {"backend": record.get("backend"), **dtypes}
    if missing := [name for name, dtype in dtypes.items() if dtype is None]:
        numerics["dtypes_note"] = record.get("dtypes_note") or f"{', '.join(missing)}: not recorded by this engine"
    return numerics


def numerics_of(record: dict, model_dir: Path) -> dict:
    """A done record's numerics as its backend reads them (a test's fake engine: by the dtypes its record names)."""
    if record.get("backend") not in BACKENDS:
        return recorded_numerics(record)
    return backend(record["backend"]).numerics(record, model_dir)


def package(name: str) -> str:
    """A registered backend's package: the folder engines/<name>/."""
    return f"{__name__}.{name}"


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
