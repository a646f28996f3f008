"""The engine interface every backend implements, and the lazy factory that picks one by name. Callers start one
with `session.open_engine`; nothing outside this package knows a backend's own names."""

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Request:
    rid: str  # unique per attempt: engines may refuse a reused id
    prompt_ids: list[int]
    sampling: dict  # max_new_tokens, temperature, top_p, top_k


@dataclass
class Result:
    output_ids: list[int]  # stop token included
    text: str
    finish_reason: str  # stop | length | abort
    prompt_tokens: int
    cached_tokens: int = 0
    error: str | None = None


class Engine(Protocol):
    max_running_requests: int  # what the engine runs at once; the driver's window is a multiple of it

    async def generate(self, request: Request) -> Result: ...

    def run(self, coro):
        """Run the driver coroutine on the event loop this engine needs."""

    def describe(self) -> dict:
        """Resolved engine arguments, for the done file and the manifest."""

    def flush_telemetry(self) -> None:
        """Write the telemetry seen so far (a benchmark reads it between runs on one engine)."""

    def kill(self) -> None:
        """Kill the engine's whole process tree, this process included (what SGLang does when it fails)."""

    def close(self) -> None: ...


def create_engine(config, model, device: str, shard_dir, watchdog, extra_sampling: dict | None = None) -> Engine:
    """Import the backend only now: after the GPU lease, and never in CI for the one not installed.
    `extra_sampling` (say ignore_eos) is passed to SGLang with every request."""
    backend = config.engine.backend
    if backend == "transformers":
        from shardgen.engines.transformers_engine import TransformersEngine

        if extra_sampling:
            raise ValueError(f"the transformers backend takes no extra sampling parameters ({extra_sampling})")
        return TransformersEngine(config.engine, model, device, watchdog, seed=config.seed)
    if backend == "sglang":
        from shardgen.engines.sglang_engine import SGLangEngine

        return SGLangEngine(config.engine, model, shard_dir, seed=config.seed,
                            cache_dir=config.engine.cache_path(config.results), extra_sampling=extra_sampling,
                            watchdog=watchdog)
    raise ValueError(f"engine.backend: unknown backend {backend!r}")
