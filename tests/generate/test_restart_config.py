"""A restart's engine settings (the backend's out-of-memory backoff) go onto the typed config with a replace on its
frozen engine section: the config was validated once, where it was read, and is not validated again."""

import dataclasses

import pytest

from shardgen.config import Config, loading


def configured() -> Config:
    return Config.from_dict({"model": {"path": "/m"}, "engine": {"memory_share": 0.9, "max_running_requests": 16},
                             "gpus": 1, "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def test_a_restarts_engine_replaces_the_section_without_validating_again(monkeypatch):
    config = configured()
    raw_before = config.raw["engine"].copy()

    def no_second_validation(*args, **kwargs):
        raise AssertionError("the config was validated again")

    monkeypatch.setattr(loading, "validate", no_second_validation)
    backed_off = dataclasses.replace(config.engine, memory_share=0.87, max_running_requests=12)
    restarted = config.with_engine_config(backed_off)
    assert restarted.engine is backed_off and restarted.model is config.model and restarted.sources is config.sources
    assert (restarted.raw["engine"]["memory_share"], restarted.raw["engine"]["max_running_requests"]) == (0.87, 12)
    assert {k: v for k, v in restarted.raw["engine"].items() if k not in ("memory_share", "max_running_requests")} \
        == {k: v for k, v in raw_before.items() if k not in ("memory_share", "max_running_requests")}
    assert config.raw["engine"] == raw_before and config.engine.memory_share == 0.9  # the config read stays as read
    with pytest.raises(AssertionError, match="validated again"):
        config.with_engine(backed_off.as_dict())  # a section spelled as a file spells it is validated, as read
