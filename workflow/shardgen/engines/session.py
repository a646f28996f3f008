"""One engine session, the same for `generate`, `tune` and the GPU benchmark: start the backend (with its telemetry
tap), watch it for stalls, and stop both when the block ends, also on an error or Ctrl-C."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from shardgen.engines import Engine
from shardgen.engines.registry import create_engine
from shardgen.engines.watchdog import OnEvent, Watchdog


@contextmanager
def open_engine(config, model, workdir: Path, *, device: str = "cuda", on_event: OnEvent | None = None,
                extra_sampling: dict | None = None, work: Sequence[dict] = ()) -> Iterator[Engine]:
    """A started engine whose telemetry goes to `workdir`. With `on_event` (a shard's attempt), a watchdog kills
    the engine after `engine.stall_seconds` without progress, and `on_event(event, detail)` hears why (a stall, an
    out-of-memory line). `work`: the prompts it will run, for settings resolved from them (`mamba_strategy: auto`)."""
    watchdog = Watchdog(config.engine.stall_seconds, on_event) if on_event is not None else None
    engine = create_engine(config, model, workdir, device=device, watchdog=watchdog, extra_sampling=extra_sampling,
                           work=work)
    try:
        if watchdog:
            watchdog.start(engine.kill)
        yield engine
    finally:
        if watchdog:
            watchdog.close()
        engine.close()
