"""One `shardgen tune` measurement: a fresh SGLang engine with one setting, run over the tune sample.

`run_setting` runs `python -m shardgen.tune.measure TUNE_DIR SETTING`, one process per setting: SGLang takes its
whole process tree down when it fails (say, out of memory at start-up), and the tuner must outlive that."""

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from shardgen.store import db, tables

from shardgen.generate import checkpoint, gpu_lease
from shardgen.layout import TuneLayout, parts_glob, telemetry_glob
from shardgen.store.atomic import write_text
from shardgen.config import Config
from shardgen.generate.driver import run_prompts, window
from shardgen.engines.session import open_engine

log = logging.getLogger(__name__)

WARM_UP = {"prompts": 16, "max_new_tokens": 16}  # compiles kernels before the clock starts (~100 s on a fresh GPU)


def load_sample(tune_dir: Path, plan: dict) -> list[dict]:
    rows = pq.read_table(TuneLayout(tune_dir).sample).to_pylist()
    if plan["max_new_tokens"]:
        for row in rows:
            row["max_new_tokens"] = plan["max_new_tokens"]
    return rows


def metrics(tune: TuneLayout, name: str, since: datetime, until: datetime | None = None) -> dict:
    """A run's figures from the parts submitted and the telemetry seen in [since, until] (the warm-up is before)."""
    con = duckdb.connect()
    checkpoint.define_parts(con, [parts_glob(tune.parts_dir(name))])
    db.parquet_view(con, "telemetry", telemetry_glob(tune.setting_dir(name)), tables.TELEMETRY)
    return db.query(con, "tune_setting", since=since, until=until or datetime.now(timezone.utc))[0]


def measure(tune_dir: Path, name: str) -> dict:
    tune = TuneLayout(tune_dir)
    plan = json.loads(tune.plan.read_text())
    config = Config.from_dict(plan["config"]).with_engine(plan["settings"][name])
    gpu = gpu_lease.lease_for(config)  # before SGLang (and torch) is imported
    prompts = load_sample(tune_dir, plan)
    warm = [{**p, "gen_key": "warm-" + p["gen_key"], "max_new_tokens": WARM_UP["max_new_tokens"]}
            for p in prompts[:WARM_UP["prompts"]]]
    t0 = time.monotonic()
    with open_engine(config, config.target_model, tune.setting_dir(name), work=prompts,
                     extra_sampling={"ignore_eos": True} if plan["ignore_eos"] else None) as engine:
        start_s = time.monotonic() - t0
        with tempfile.TemporaryDirectory() as tmp:
            run_prompts(engine, warm, Path(tmp) / "warm-up", config, shard=0, attempt=1, gpu=gpu,
                        desc=f"{name} warm-up")
        since = datetime.now(timezone.utc)
        run_prompts(engine, prompts, tune.parts_dir(name), config, shard=0, attempt=1, gpu=gpu, desc=name)
        described, in_flight = engine.info.record, window(config, engine)
    result = {"setting": name, "status": "ok", "engine_start_s": round(start_s, 1), "window": in_flight,
              **metrics(tune, name, since), "engine": described}
    write_text(json.dumps(result, indent=1, default=str), tune.result(name))
    return result


def run_setting(tune_dir: Path, name: str) -> dict:
    """Measure one setting in a child process; a child that dies (SGLang's tree kill, OOM) is recorded as failed."""
    tune = TuneLayout(tune_dir)
    workdir = tune.setting_dir(name)
    if workdir.exists():  # an interrupted measurement: its telemetry would mix with the new one
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    log.info("tune: measuring %s (log: %s)", name, tune.engine_log(name))
    with open(tune.engine_log(name), "w") as out:
        proc = subprocess.run([sys.executable, "-m", "shardgen.tune.measure", str(tune_dir), name],
                              stdout=out, stderr=subprocess.STDOUT)
    result_path = tune.result(name)
    if proc.returncode == 0 and result_path.exists():
        return json.loads(result_path.read_text())
    tail = tune.engine_log(name).read_text(errors="replace").splitlines()[-15:]
    result = {"setting": name, "status": "failed", "returncode": proc.returncode, "log_tail": tail}
    write_text(json.dumps(result, indent=1), result_path)
    log.error("tune: %s failed (rc %s); last log lines:\n%s", name, proc.returncode, "\n".join(tail))
    return result


if __name__ == "__main__":
    measure(Path(sys.argv[1]), sys.argv[2])
