"""Engine deaths and stalls, with the real adapter over tests/fake_sglang: the engine process is SIGKILLed (as
SGLang's tree kill does), the cause is logged, the next attempt resumes from committed parts, lowers memory only
after an out-of-memory death (three steps at most)."""

import json
import signal

import pyarrow.parquet as pq
import pytest

from shardgen.layout import Layout
from shardgen.prompts.stage import build_prompts
from shardgen.prompts.split import split

from helpers import run_generate



@pytest.fixture
def shard(make_config, write_jsonl, monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(tmp_path / "gpu-locks"))
    monkeypatch.setenv("SHARDGEN_LOCK_DIR", str(tmp_path / "locks"))

    def make(stall_seconds=30):
        rows = [{"query": f"Task {i}: list {i} prime numbers."} for i in range(30)]
        cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                          engine={"backend": "sglang", "max_running_requests": 4, "inflight": 1.0,
                                  # mem_fraction_static: the old spelling
                                  "mem_fraction_static": 0.9, "stall_seconds": stall_seconds, "args": {}},
                          gpus=1, checkpoint={"every_records": 4, "every_seconds": 1})
        layout = Layout(cfg.results)
        build_prompts(cfg, layout.prompts_dir)
        split(layout.prompts, layout.split_dir, 1)
        return cfg, layout

    return make


def finished_once(layout) -> bool:
    keys = [r["gen_key"] for p in layout.shard_dir(0).glob("part-*.parquet")
            for r in pq.read_table(p, columns=["gen_key", "finish_reason"]).to_pylist()
            if r["finish_reason"] in ("stop", "length")]
    return sorted(keys) == sorted(pq.read_table(layout.split(0))["gen_key"].to_pylist())


def test_an_engine_that_dies_on_its_nth_request_resumes(shard):
    cfg, layout = shard()
    proc = run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_DIE_AFTER="12")
    assert proc.returncode == -signal.SIGKILL
    committed = {p: p.read_bytes() for p in layout.shard_dir(0).glob("part-*.parquet")}
    assert committed
    proc = run_generate(cfg, 0, "0.5.17")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(p.read_bytes() == b for p, b in committed.items()) and finished_once(layout)
    attempts = json.loads(layout.done(0).read_text())["attempts"]
    assert [(a["status"], a["cause"]) for a in attempts] == [("died", "killed"), ("finished", None)]
    assert attempts[1]["restart_after"] == ["killed"] and attempts[1]["engine_overrides"] == {}


def test_out_of_memory_death_lowers_memory_on_restart(shard):
    cfg, layout = shard()
    proc = run_generate(cfg, 0, "0.5.13.post1", FAKE_SGLANG_OOM_AFTER="6")
    assert proc.returncode == -signal.SIGKILL
    proc = run_generate(cfg, 0, "0.5.13.post1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(layout.done(0).read_text())
    first, second = done["attempts"]
    assert first["cause"] == "out_of_memory" and "CUDA out of memory" in first["detail"]
    assert second["engine_overrides"] == {"memory_share": 0.87, "max_running_requests": 3}
    args = done["engine"]["server_args"]
    assert (args["mem_fraction_static"], args["max_running_requests"], args["cuda_graph_max_bs"]) == (0.87, 3, 3)
    assert finished_once(layout)


def test_a_stalled_engine_is_killed_and_the_shard_resumes(shard):
    cfg, layout = shard(stall_seconds=3)
    proc = run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_STALL_AFTER="9")
    assert proc.returncode == -signal.SIGKILL and "no engine progress for" in proc.stderr
    proc = run_generate(cfg, 0, "0.5.17")
    assert proc.returncode == 0, proc.stderr[-2000:]
    attempts = json.loads(layout.done(0).read_text())["attempts"]
    assert attempts[0]["cause"] == "stalled" and attempts[1]["engine_overrides"] == {}  # memory only after OOM
    assert finished_once(layout)


def test_long_requests_with_decode_progress_are_not_a_stall(shard):
    cfg, layout = shard(stall_seconds=2)
    proc = run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_LATENCY="3")  # no completion for 3 s, decode lines keep coming
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert finished_once(layout)


def test_repeated_oom_deaths_lower_memory_at_most_three_times_and_a_rerun_is_never_refused(shard):
    cfg, layout = shard()
    for _ in range(4):
        assert run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_OOM_AFTER="2").returncode == -signal.SIGKILL
    proc = run_generate(cfg, 0, "0.5.17")
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = json.loads(layout.done(0).read_text())["attempts"][-1]
    assert last["restart_after"] == ["out_of_memory"] * 4
    assert last["engine_overrides"] == {"memory_share": 0.81, "max_running_requests": 1}  # 3 steps down
    assert finished_once(layout)


def run_retry(cfg, limit=3, **env):
    import os

    import preloaded
    from helpers import FAKE

    environ = {**os.environ, "PYTHONPATH": f"{FAKE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "FAKE_SGLANG_VERSION": "0.5.17", **env}
    return preloaded.run(["--config", str(cfg.write_resolved()), "retry", "--limit", str(limit)], environ, timeout=120)


def test_failed_requests_are_listed_and_retried_up_to_a_limit(shard):
    cfg, layout = shard()
    assert run_generate(cfg, 0, "0.5.17", FAKE_SGLANG_ABORT_EVERY="5").returncode == 0
    done = json.loads(layout.done(0).read_text())
    failed = pq.read_table(layout.shard_dir(0) / "failed.parquet").to_pylist()
    assert done["failed"] == len(failed) == 6 and done["generated"] == 24
    assert all(f["error"] == "fake scheduler aborted it" for f in failed)

    proc = run_generate(cfg, 0, "0.5.17")  # a plain resume leaves failures to `shardgen retry`
    assert "0 to generate" in proc.stderr and json.loads(layout.done(0).read_text())["failed"] == 6

    # every retried request aborts again: after 3 failures a prompt is given up on
    assert run_retry(cfg, FAKE_SGLANG_ABORT_EVERY="1").returncode == 0
    assert run_retry(cfg, FAKE_SGLANG_ABORT_EVERY="1").returncode == 0
    proc = run_retry(cfg, FAKE_SGLANG_ABORT_EVERY="1")
    assert proc.returncode == 0 and "0 to retry" in proc.stderr
    assert json.loads(layout.done(0).read_text())["failed"] == 6

    proc = run_retry(cfg, limit=4)  # one more allowed, and now the engine answers
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(layout.done(0).read_text())
    assert (done["generated"], done["failed"]) == (30, 0) and finished_once(layout)
    assert pq.read_table(layout.shard_dir(0) / "failed.parquet").num_rows == 0
