"""One `shardgen tune` measurement: a fresh SGLang engine with one setting, run over the tune sample.

Run as `python -m shardgen.tune_run TUNE_DIR SETTING` by `shardgen tune`, one process per setting: SGLang takes its
whole process tree down when it fails (say, out of memory at start-up), and the tuner must outlive that."""

import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
from tqdm import tqdm

from shardgen import db, gpu_lease, tables, telemetry
from shardgen.atomic import write_text
from shardgen.config import Config
from shardgen.driver import PartSink, drive
from shardgen.model import ModelInfo
from shardgen.parts import PartWriter

WARM_UP = {"prompts": 16, "max_new_tokens": 16}  # compiles kernels before the clock starts (~100 s on a fresh GPU)


def load_sample(tune_dir: Path, plan: dict) -> list[dict]:
    rows = pq.read_table(tune_dir / "sample.parquet").to_pylist()
    if plan["max_new_tokens"]:
        for row in rows:
            row["max_new_tokens"] = plan["max_new_tokens"]
    return rows


def _drive(engine, prompts: list[dict], parts_dir: Path, window: int, gpu: str, config: Config, desc: str) -> None:
    sink = PartSink(PartWriter(parts_dir), **config.checkpoint.as_dict())
    with tqdm(total=len(prompts), desc=desc, unit="req", file=sys.stderr, mininterval=5) as bar:
        engine.run(drive(engine, prompts, window=window, sink=sink, shard=0, attempt=1, gpu=gpu, progress=bar))


def metrics(workdir: Path, since: datetime, until: datetime | None = None) -> dict:
    """A run's figures from the parts submitted and the telemetry seen in [since, until] (the warm-up is before)."""
    con = duckdb.connect()
    db.parquet_view(con, "parts", str(workdir / "parts" / "part-*.parquet"), tables.PART)
    db.parquet_view(con, "telemetry", str(workdir / "telemetry-*.parquet"), telemetry.SCHEMA)
    return db.query(con, "tune_setting", since=since, until=until or datetime.now(timezone.utc))[0]


def measure(tune_dir: Path, name: str) -> dict:
    plan = json.loads((tune_dir / "plan.json").read_text())
    config = Config.from_dict(plan["config"]).with_engine(plan["settings"][name])
    workdir = tune_dir / name
    gpu = gpu_lease.lease_for(config)  # before SGLang (and torch) is imported
    from shardgen.engines.sglang_engine import SGLangEngine

    prompts = load_sample(tune_dir, plan)
    t0 = time.monotonic()
    engine = SGLangEngine(config.engine, ModelInfo.from_config(config.model), workdir, seed=config.seed,
                          cache_dir=config.engine.cache_path(config.results),
                          extra_sampling={"ignore_eos": True} if plan["ignore_eos"] else None)
    start_s = time.monotonic() - t0
    try:
        window = config.engine.window(engine.max_running_requests)
        warm = [{**p, "gen_key": "warm-" + p["gen_key"], "max_new_tokens": WARM_UP["max_new_tokens"]}
                for p in prompts[:WARM_UP["prompts"]]]
        with tempfile.TemporaryDirectory() as tmp:
            _drive(engine, warm, Path(tmp) / "warm-up", window, gpu, config, f"{name} warm-up")
        since = datetime.now(timezone.utc)
        _drive(engine, prompts, workdir / "parts", window, gpu, config, name)
        engine.telemetry.flush()
        described = engine.describe()
    finally:
        engine.close()
    result = {"setting": name, "status": "ok", "engine_start_s": round(start_s, 1), "window": window,
              **metrics(workdir, since), "engine": described}
    write_text(json.dumps(result, indent=1, default=str), workdir / "result.json")
    return result


if __name__ == "__main__":
    measure(Path(sys.argv[1]), sys.argv[2])
