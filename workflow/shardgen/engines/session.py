"""One engine session, the same for `generate`, `tune` and the GPU benchmark: start the backend (with its telemetry
tap), watch it for stalls, and stop both when the block ends, also on an error or Ctrl-C."""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from shardgen.engines import Engine, create_engine
from shardgen.engines.watchdog import Watchdog


@contextmanager
def open_engine(config, model, workdir: Path, *, device: str = "cuda", attempt: int | None = None,
                extra_sampling: dict | None = None, work: Sequence[dict] = ()) -> Iterator[Engine]:
    """A started engine whose telemetry goes to `workdir`. With an `attempt` (a shard's), a watchdog kills the
    engine after `engine.stall_seconds` without progress and logs why in that attempt's record. `work`: the
    prompts it will run, for settings resolved from them (`mamba_strategy: auto`)."""
    watchdog = Watchdog(workdir, attempt, config.engine.stall_seconds) if attempt is not None else None
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
