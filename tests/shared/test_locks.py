"""Stale Snakemake locks: removed when no other run is alive; left, and said to be live, when one is."""

import logging
import subprocess
import sys
from functools import partial
from types import SimpleNamespace

import pytest

from shardgen.store import locks
from shardgen.store.locks import clear_stale_locks


def test_a_live_run_is_named_and_its_locks_are_kept(tmp_path, caplog, monkeypatch, capsys):
    state = tmp_path / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.input.lock").write_text("")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from shardgen.store.locks import hold_run_guard\n"
        f"assert hold_run_guard(Path({str(state)!r})); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(locks, "_guard", None)
        monkeypatch.setattr(locks, "hold_run_guard",
                            partial(locks.hold_run_guard, wait_s=0.5))
        at_exit: list = []  # what the run says again as it exits, kept here instead of in pytest's own exit
        monkeypatch.setattr(locks.atexit, "register", at_exit.append)
        with caplog.at_level(logging.ERROR, "shardgen"):
            assert clear_stale_locks(SimpleNamespace(is_main_process=True), state) == []
    finally:
        holder.kill()
        holder.wait()
    assert (state / "locks" / "0.input.lock").exists()
    assert f"another snakemake run of this workflow is alive (pid {holder.pid})" in caplog.text
    assert "do not use --unlock" in caplog.text
    assert len(at_exit) == 1
    at_exit[0]()
    assert capsys.readouterr().err.startswith(f"shardgen: another snakemake run of this workflow is alive (pid "
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
        "assert hold_run_guard(Path('.snakemake')); print('held', flush=True); time.sleep(120)")],
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
        f"shardgen: another snakemake run of this workflow is alive (pid {holder.pid}); do not use --unlock (its "
        f"locks are not stale): wait for it to finish, or stop it (Ctrl-C in its terminal, or kill -TERM {holder.pid})")
