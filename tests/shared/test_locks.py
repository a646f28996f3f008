"""Stale Snakemake locks: removed when no other run is alive; left, and said to be live, when one is."""

import logging
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from shardgen.store import locks
from shardgen.store.locks import clear_stale_locks


def test_a_live_run_is_named_and_its_locks_are_kept(tmp_path, caplog, monkeypatch, capsys):
    state, results = tmp_path / ".snakemake", tmp_path / "results"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.output.lock").write_text(f"{results}/prompts/prompts.parquet\n")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from shardgen.store.locks import hold_run_guard\n"
        f"assert hold_run_guard(Path({str(results)!r}), Path({str(state)!r})); print('held', flush=True); "
        "time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(locks, "_guard", None)
        monkeypatch.setattr(locks, "hold_run_guard",
                            partial(locks.hold_run_guard, wait_s=0.5))
        at_exit: list = []  # what the run says again as it exits, kept here instead of in pytest's own exit
        monkeypatch.setattr(locks.atexit, "register", at_exit.append)
        with caplog.at_level(logging.ERROR, "shardgen"):
            assert clear_stale_locks(SimpleNamespace(is_main_process=True), results, state) == []
    finally:
        holder.kill()
        holder.wait()
    assert (state / "locks" / "0.output.lock").exists()
    assert f"another snakemake run on {results} is alive (pid {holder.pid})" in caplog.text
    assert "do not use --unlock" in caplog.text
    assert len(at_exit) == 1
    at_exit[0]()
    assert capsys.readouterr().err.startswith(f"shardgen: another snakemake run on {results} is alive (pid "
                                              f"{holder.pid})")


@pytest.mark.slow
def test_a_second_run_ends_on_shardgens_word_not_snakemakes_unlock_advice(tmp_path):
    import os
    from pathlib import Path

    from conftest import copy_workflow

    work = copy_workflow(tmp_path)
    state = work / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.output.lock").write_text("results/prompts/prompts.parquet\n")  # as the live run locks it
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from shardgen.store.locks import hold_run_guard\n"
        "assert hold_run_guard(Path('results'), Path('.snakemake')); print('held', flush=True); time.sleep(120)")],
        cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        bin_dir = Path(sys.executable).parent
        second = subprocess.run([str(bin_dir / "snakemake"), "--configfile", "config/demo.yaml", "-c1"], cwd=work,
                                env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
                                capture_output=True, text=True, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    out = (second.stdout + second.stderr).strip()
    assert second.returncode != 0 and "LockException" in out, out[-3000:]  # refused, as before
    assert out.splitlines()[-1] == (
        f"shardgen: another snakemake run on results is alive (pid {holder.pid}); do not use --unlock (its "
        f"locks are not stale): wait for it to finish, or stop it (Ctrl-C in its terminal, or kill -TERM {holder.pid})")


def test_only_the_stale_locks_of_this_runs_results_folder_are_removed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # Snakemake names the locked files relative to the working folder
    monkeypatch.setattr(locks, "_guard", None)
    (tmp_path / ".snakemake" / "locks").mkdir(parents=True)
    for n, folder in enumerate(("results", "other")):
        (tmp_path / ".snakemake" / "locks" / f"{n}.input.lock").write_text(f"config/demo/x.jsonl\n{folder}/split\n")
        (tmp_path / ".snakemake" / "locks" / f"{n}.output.lock").write_text(f"{folder}/dataset/data.parquet\n")
    removed = clear_stale_locks(SimpleNamespace(is_main_process=True), Path("results"), Path(".snakemake"))
    assert [p.name for p in removed] == ["0.input.lock", "0.output.lock"]
    assert sorted(p.name for p in (tmp_path / ".snakemake" / "locks").iterdir()) == ["1.input.lock", "1.output.lock"]


@pytest.mark.slow
def test_a_run_on_another_results_folder_is_no_other_run(tmp_path, demo_model, monkeypatch):
    """Two runs in one working folder, each on its own results folder, as Snakemake allows: the second is not told to
    stop the first (issue 45, item 7). (Snakemake itself removes its whole locks folder as a run ends, the first
    run's locks too: test_only_the_stale_locks_of_this_runs_results_folder_are_removed is what shardgen removes.)"""
    from conftest import FAKE_SGLANG_DEMO, copy_workflow, demo_snakemake, fake_sglang_run, own_group, wait_for

    work = copy_workflow(tmp_path, demo_model, results="results-a")
    # the first run generates long enough for the second to start and finish beside it, idle: the fake SGLang's
    # requests take 10 minutes each
    (work / "config" / "test.yaml").write_text(yaml.safe_dump(
        {"results_dir": "results-a", "model": {"path": "results-a/demo-model"}, **FAKE_SGLANG_DEMO}))
    args = fake_sglang_run(monkeypatch, work, FAKE_SGLANG_LATENCY="600")
    with own_group(demo_snakemake(work, *args, start_new_session=True)) as first:
        wait_for(first, lambda: list(work.glob("results-a/generate/shard-*/heartbeat.json")), "shard generating")
        (work / "config" / "test.yaml").write_text("results_dir: results-b\nmodel: {path: results-b/demo-model}\n")
        second = demo_snakemake(work, "-c1", "results-b/demo-model/config.json")
        out, _ = second.communicate(timeout=300)
        assert second.returncode == 0, out[-3000:]
        assert "another snakemake run" not in out and "kill" not in out, out[-3000:]
        assert first.poll() is None  # the first run goes on
