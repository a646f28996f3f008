"""What a diagnosis reads from one engine run: the telemetry rows (an engine log's batch lines as its backend reads
them, or a shard's telemetry parts), the start-up pool sizes, the settings it ran with, the log lines behind
each row (evidence), its retractions, and a shard's prefix cache per turn (its done file); and the backend that
ran it, which reads its own start-up facts and names the settings of its own that lift a bound (engines/advice.py)."""

import json
from dataclasses import dataclass, field
from pathlib import Path

from shardgen.engines import RunSettings
from shardgen.engines.registry import DEFAULT_BACKEND, backend, info_from_record
from shardgen.engines.advice import Bound, Pools
from shardgen.engines.retractions import Retractions
from shardgen.generate import checkpoint
from shardgen.layout import Layout, telemetry_glob


@dataclass
class Run:
    """What a diagnosis needs from one engine run."""
    rows: list[dict]
    lines: dict[int, str]  # row index -> the log line it came from (for evidence)
    facts: dict
    settings: RunSettings
    retractions: list[str]  # the retraction lines of a log (evidence)
    gpu: str | None = None  # the GPU's name where the run recorded it (a shard's done file)
    # the retractions added up (a log's lines, or a shard's done file); None where the run recorded none
    retracted: Retractions | None = None
    prefix_cache_by_turn: list[dict] = field(default_factory=list)  # a shard's done file (shard_prefix_cache.sql)
    backend: str = DEFAULT_BACKEND  # the registered backend whose engine ran it
    hidden_pass: dict = field(default_factory=dict)  # a shard's done file: the hidden-state capture pass's record

    def prefix_cache_on(self, cached_tokens: int) -> bool:
        """Whether a prefix cache served the run: what the backend said it ran with, else whether any request took
        tokens from one (`cached_tokens` seen, a log without the start-up settings)."""
        return self.settings.prefix_cache if self.settings.prefix_cache is not None else cached_tokens > 0

    @property
    def strategy(self) -> str | None:
        return self.settings.mamba_strategy

    @property
    def graph_limit(self) -> int | None:
        return self.settings.graph_limit

    @property
    def pools(self) -> Pools:
        return backend(self.backend).pools(self.facts)

    def advice(self, code: str, **said) -> list[str]:
        """The backend's settings that lift the bound `code` (advice.BOUNDS), told the run's pools and settings."""
        slots = self.settings.mamba_slots_per_request
        return backend(self.backend).advice(Bound(code, self.pools, graph_limit=self.graph_limit,
                                                  mamba_slots_per_request=slots, **said))


def read_log(path: Path, engine: str = DEFAULT_BACKEND) -> Run:
    """A log of an `engine` backend's engine, read line by line by that backend."""
    read_line = backend(engine).read_log_line
    rows: list[dict] = []
    lines, facts, settings, retractions, retracted = {}, {}, RunSettings(), [], Retractions()
    for line in path.read_text(errors="replace").splitlines():
        reading = read_line(line)
        if reading.row:
            lines[len(rows)] = line.strip()
            rows.append(reading.row)
            continue
        facts.update(reading.facts)
        if reading.settings is not None:
            settings = reading.settings
        elif reading.retraction is not None:
            retractions.append(line.strip())
            retracted.add(reading.retraction)
    return Run(rows, lines, facts, settings, retractions, retracted=retracted, backend=engine)


def read_shard(shard_dir: Path) -> Run:
    import duckdb

    rows = duckdb.execute(f"SELECT * FROM '{telemetry_glob(shard_dir)}' WHERE kind <> 'client' ORDER BY ts").df()
    # no done file: a shard still running, or whose attempts all died (its telemetry is what tells why)
    done = checkpoint.read_done(Layout.done_of(shard_dir)) or {}
    record, by_turn = done.get("engine"), done.get("prefix_cache_by_turn") or []
    records = rows.to_dict("records")
    lines = {i: json.dumps({k: v for k, v in r.items() if v == v and v is not None}, default=str)
             for i, r in enumerate(records)}
    if not record:  # no engine started (nothing was left to generate), or no done file yet
        return Run(records, lines, {}, RunSettings(), [], prefix_cache_by_turn=by_turn)
    info = info_from_record(record)
    return Run(records, lines, info.startup, info.settings, [], info.gpu_name, Retractions.of_record(record), by_turn,
               info.backend, record.get("hidden_pass") or {})


def read(path: Path, engine: str = DEFAULT_BACKEND) -> Run:
    """A shard folder (its done file names its backend), or a log file of an `engine` backend's engine."""
    return read_shard(path) if path.is_dir() else read_log(path, engine)
