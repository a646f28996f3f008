"""Stale Snakemake locks: removed when no other run is alive; left, and said to be live, when one is."""

import logging
import subprocess
import sys
from functools import partial
from types import SimpleNamespace

from shardgen import locks
from shardgen.locks import clear_stale_locks


def test_a_live_run_is_named_and_its_locks_are_kept(tmp_path, caplog, monkeypatch):
    state = tmp_path / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.input.lock").write_text("")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from shardgen.locks import hold_run_guard\n"
        f"assert hold_run_guard(Path({str(state)!r})); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(locks, "_guard", None)
        monkeypatch.setattr(locks, "hold_run_guard",
                            partial(locks.hold_run_guard, wait_s=0.5))
        with caplog.at_level(logging.ERROR, "shardgen"):
            assert clear_stale_locks(SimpleNamespace(is_main_process=True), state) == []
    finally:
        holder.kill()
        holder.wait()
    assert (state / "locks" / "0.input.lock").exists()
    assert f"another snakemake run of this workflow is alive (pid {holder.pid})" in caplog.text
    assert "do not use --unlock" in caplog.text
