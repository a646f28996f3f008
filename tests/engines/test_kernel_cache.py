"""engine.cache_dir: every compiled-kernel cache variable reaches the engine's scheduler process (fake sglang)."""

from pathlib import Path

import pytest

from shardgen.config import Config
from shardgen.engines.kernel_cache import CACHE_VARS, resolve
from shardgen.model.target import ModelInfo





def scheduler_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.parametrize("cache_dir", [None, "ABSOLUTE"])
def test_cache_variables_reach_the_scheduler_process(fake_sglang, demo_model, tmp_path, cache_dir):
    from shardgen.engines.sglang.engine import SGLangEngine

    engine_cfg = {"backend": "sglang", "max_running_requests": 4}
    if cache_dir:
        engine_cfg["cache_dir"] = str(tmp_path / "shared-cache")
    cfg = Config.from_dict({"model": {"path": str(demo_model)}, "engine": engine_cfg, "gpus": 1,
                            "results_dir": str(tmp_path / "results"),
                            "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})
    expected = tmp_path / "shared-cache" if cache_dir else tmp_path / "results" / "engine-cache"
    engine = SGLangEngine(cfg, ModelInfo.from_config(cfg.model), tmp_path / "shard")
    try:
        seen = scheduler_environ(engine.engine.scheduler.pid)
    finally:
        engine.close()
    for var, sub in CACHE_VARS.items():
        assert seen.get(var) == str(expected / sub), var
        assert (expected / sub).is_dir()
    assert engine.info.record["cache_dir"] == str(expected)


def test_relative_cache_dir_lies_under_the_results_folder():
    assert resolve("engine-cache", Path("out")) == Path("out/engine-cache")
    assert resolve("/shared/cache", Path("out")) == Path("/shared/cache")
