"""The engine interface every backend implements: a request and its result, what an engine ran with in no
backend's words (`RunSettings`, `EngineInfo`), what a line of its log says (`LogLine`), and the protocols (`Engine`,
`Backend`, `Tunable`, `BackendSettings`). Callers start an engine with `session.open_engine`; other stages read its
`EngineInfo`, never a backend's own argument names. A backend is a package here, `engines/<name>/`, that the
registry (`registry.py`) finds by its name; only the registry imports inside it."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from shardgen.engines.advice import Advising
from shardgen.engines.retractions import Retraction
from shardgen.engines.scoring import ScoreRequest, Scores


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
    """The class in a backend's `engine` module: its constructor starts an engine; the class methods need none. What
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
    """A backend's `settings` module, light, for the configuration: validation imports it, never the engine."""
    SCHEMA: dict  # the JSON schema of `engine.<name>`: this backend's own settings with their defaults

    def upgrade(self, engine: dict) -> list[str]:
        """Move this backend's old spellings in a raw `engine` section onto today's keys, in place: one line per
        key moved, saying what to write instead."""


def recorded_numerics(record: dict) -> dict:
    """The dtypes a done record's engine section names (`dtype`, `kv_cache_dtype`, `ssm_state_dtype`), and a note
    where one is missing: what an engine that records them plainly reports as its numerics."""
    dtypes = {"weights": record.get("dtype"), "kv": record.get("kv_cache_dtype"),
              "ssm_state": record.get("ssm_state_dtype")}
    numerics = {"backend": record.get("backend"), **dtypes}
    if missing := [name for name, dtype in dtypes.items() if dtype is None]:
        numerics["dtypes_note"] = record.get("dtypes_note") or f"{', '.join(missing)}: not recorded by this engine"
    return numerics
