"""GPUs per engine (tensor x data parallel ranks), derived once in EngineConfig and used by the lease, the rule's
`gpu` resource and the request window; over tests/fake_sglang on N fake GPUs (the fake refuses to start with fewer
GPUs in CUDA_VISIBLE_DEVICES than tp_size x dp_size; no GPU ran here)."""

import json
import os
import re
import subprocess
from datetime import datetime

import pyarrow.parquet as pq
import pytest

from shardgen.config import Config
from shardgen.layout import Layout
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts

import preloaded
from helpers import FAKE


def engine_config(**engine) -> Config:
    return Config.from_dict({"model": {"path": "/m"}, "engine": {"backend": "sglang", **engine}, "gpus": 8,
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


@pytest.mark.parametrize("engine, gpus_per_engine, shards", [
    ({}, 1, 8),
    ({"tp_size": 2}, 2, 4),
    ({"args": {"dp_size": 2}}, 2, 4),
    ({"tp_size": 2, "args": {"dp_size": 2}}, 4, 2),
    ({"tp_size": 1, "args": {"tp_size": 4}}, 4, 2),  # engine.args reaches SGLang as it is: its tp_size is the one run
])
def test_gpus_per_engine_is_tensor_times_data_parallel_ranks(engine, gpus_per_engine, shards):
    cfg = engine_config(**engine)
    assert cfg.engine.gpus_per_engine == gpus_per_engine
    assert cfg.n_shards == cfg.engines == shards


def test_each_generate_job_asks_the_scheduler_for_gpus_per_engine(tmp_path):
    from conftest import copy_workflow

    workdir = copy_workflow(tmp_path)
    (workdir / "over.yaml").write_text("gpus: 4\nshards: null\nengine: {backend: sglang, args: {dp_size: 2}}\n")
    dry = subprocess.run(["snakemake", "-n", "--configfile", "config/demo.yaml", "over.yaml", "--resources", "gpu=4"],
                         cwd=workdir, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = re.findall(r"rule generate:\n(?:    .*\n)*?    resources: .*?gpu=(\d+)", dry.stdout + dry.stderr)
    assert jobs == ["2", "2"]  # one job per dp-2 engine on 4 GPUs, each asking for both its ranks' GPUs


@pytest.fixture
def shards(make_config, write_jsonl, tmp_path):
    """Prompts split into one shard per engine on `gpus` fake GPUs, and a way to run every shard's generate job
    at once, as Snakemake does with --resources gpu=N."""
    def make(gpus: int, **engine):
        rows = [{"query": f"Question {i}: " + "why " * i} for i in range(36)]
        cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                          engine={"backend": "sglang", "max_running_requests": 3, "inflight": 2.0, **engine},
                          gpus=gpus, shards=None, checkpoint={"every_records": 4, "every_seconds": 1})
        layout = Layout(cfg.results)
        build_prompts(cfg, layout.prompts_dir)
        split(layout.prompts, layout.split_dir, cfg.n_shards)
        return cfg, layout

    def run_all(cfg, layout) -> list[str]:
        env = {**os.environ, "PYTHONPATH": f"{FAKE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "FAKE_SGLANG_VERSION": "0.5.17", "FAKE_SGLANG_LATENCY": "0.2",  # long enough for the jobs to overlap
               "SHARDGEN_GPU_LOCK_DIR": str(tmp_path / "gpu-locks"), "SHARDGEN_LOCK_DIR": str(tmp_path / "locks")}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        config_path = str(cfg.write_resolved())
        procs = [preloaded.start(["--config", config_path, "generate", "--shard", str(s), "--done",
                                  str(layout.done(s))], env)
                 for s in range(cfg.n_shards)]
        logs = []
        for proc in procs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
            logs.append(err)
        return logs

    return make, run_all


def _attempt_span(done: dict) -> tuple[datetime, datetime]:
    attempt = done["attempts"][-1]
    return datetime.fromisoformat(attempt["started_at"]), datetime.fromisoformat(attempt["finished_at"])


def _check_disjoint_and_concurrent(layout, n_shards: int, gpus_each: int) -> list[dict]:
    dones = [json.loads(layout.done(s).read_text()) for s in range(n_shards)]
    leases = [d["gpu"].split(",") for d in dones]
    assert all(len(ids) == gpus_each for ids in leases)
    held = [g for ids in leases for g in ids]
    assert len(set(held)) == len(held) == n_shards * gpus_each  # no GPU leased twice
    spans = [_attempt_span(d) for d in dones]
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # every job held its lease at once
    for s, ids in enumerate(leases):  # every row of a shard names its own lease
        gpus = {g for part in layout.shard_dir(s).glob("part-*.parquet")
                for g in pq.read_table(part, columns=["gpu"])["gpu"].to_pylist()}
        assert gpus == {",".join(ids)}
    return dones


def test_n_shards_on_n_gpus_never_share_one(shards):
    make, run_all = shards
    cfg, layout = make(gpus=3)
    assert cfg.n_shards == 3
    run_all(cfg, layout)
    _check_disjoint_and_concurrent(layout, 3, 1)


def test_a_data_parallel_engine_leases_its_ranks_gpus_and_a_window_across_them(shards):
    make, run_all = shards
    cfg, layout = make(gpus=4, args={"dp_size": 2})
    assert cfg.n_shards == 2
    logs = run_all(cfg, layout)
    dones = _check_disjoint_and_concurrent(layout, 2, 2)
    for done, log in zip(dones, logs, strict=True):
        # each of the 2 ranks runs the cap of 3: the engine reports 6, and the window is inflight (2) x 6
        assert done["engine"]["max_running_requests"] == 6 and done["engine"]["resolved"]["dp_size"] == 2
        assert re.search(r"prompts to generate, window 12\b", log)
