"""open_engine over tests/fake_sglang: the engine, its log tap, telemetry writer and watchdog all stop however the
block ends (an error, Ctrl-C)."""

import os

import pytest

from shardgen.config import Config
from shardgen.engines.session import open_engine
from shardgen.model.target import ModelInfo



@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_the_engine_and_its_threads_stop_however_the_block_ends(fake_sglang, demo_model, tmp_path,  # noqa: F811
                                                               interrupt):
    cfg = Config.from_dict({"model": {"path": str(demo_model)},
                            "engine": {"backend": "sglang", "max_running_requests": 4},
                            "gpus": 1, "results_dir": str(tmp_path / "results"),
                            "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})
    stderr = os.fstat(2).st_ino
    with pytest.raises(interrupt):
        with open_engine(cfg, ModelInfo.from_config(cfg.model), tmp_path / "shard", on_event=lambda *_: None) as engine:
            assert engine.watchdog.thread.is_alive() and engine.tap.thread.is_alive()
            assert os.fstat(2).st_ino != stderr  # the tap holds fd 2
            raise interrupt()
    assert engine.engine.scheduler.poll() is not None  # SGLang shut down
    assert engine.watchdog.stop.is_set() and not engine.telemetry.thread.is_alive()
    assert os.fstat(2).st_ino == stderr and not engine.tap.thread.is_alive()  # fd 2 given back, the tap drained
