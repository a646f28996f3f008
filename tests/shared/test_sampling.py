import json
import shutil

import pytest

from shardgen.config import Config, ConfigError
from shardgen.sampling import FIELDS, names, served

from conftest import REPO

QWEN3 = REPO / "tests" / "data" / "qwen3"
SOURCE = {"name": "m", "path": "x.jsonl", "format": "query_response"}


def test_the_model_generation_config_gives_what_it_sets_and_neutral_the_rest():
    """Qwen3's real generation_config.json: its temperature, top_p and top_k, as served; min_p and
    repetition_penalty, which it does not set, neutral, each with its origin."""
    assert served(QWEN3) == {"temperature": (0.6, "generation_config"), "top_p": (0.95, "generation_config"),
                             "top_k": (20, "generation_config"), "min_p": (0.0, "neutral"),
                             "repetition_penalty": (1.0, "neutral")}


def test_a_model_without_generation_config_is_sampled_neutrally(tmp_path):
    assert served(tmp_path) == {f.name: (f.neutral, "neutral") for f in FIELDS}
    (tmp_path / "generation_config.json").write_text(json.dumps({"top_k": 0, "repetition_penalty": 1.1}))
    assert served(tmp_path)["top_k"] == (-1, "generation_config")  # HF's 0 (off) is the engines' -1
    assert served(tmp_path)["repetition_penalty"] == (1.1, "generation_config")


def test_explicit_values_win_over_the_generation_config_and_a_schema_default_is_not_explicit():
    model = served(QWEN3)
    bare = Config.from_dict({"model": {"path": "m"}, "sources": [SOURCE]})
    assert bare.sampling_for(bare.sources[0], model) == {"max_new_tokens": 2048, "temperature": 0.6, "top_p": 0.95,
                                                        "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0}
    config = Config.from_dict({"model": {"path": "m"}, "defaults": {"temperature": 0.7, "min_p": 0.05},
                               "sources": [{**SOURCE, "sampling": {"top_k": [5, 50], "temperature": 1.0}}]})
    source = config.sources[0]
    assert config.sampling_for(source, model) == {"max_new_tokens": 2048, "temperature": 1.0, "top_p": 0.95,
                                                  "top_k": [5, 50], "min_p": 0.05, "repetition_penalty": 1.0}
    assert config.sampling_origins(source, model) == {
        "temperature": "source", "top_p": "generation_config", "top_k": "source", "min_p": "config.defaults",
        "repetition_penalty": "neutral"}


def test_the_shipped_configs_leave_sampling_to_the_model():
    for name in ("config.yaml", "demo.yaml"):
        text = (REPO / "config" / name).read_text()
        assert not any(f"\n  {field}:" in text for field in names()), name


def test_the_gen_key_changes_with_the_generation_config_and_not_with_a_field_at_its_no_op(tmp_path):
    config = Config.from_dict({"model": {"path": "m"}, "sources": [SOURCE]})
    source = config.sources[0]
    before = {"max_new_tokens": 2048, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "extra": "{}"}
    assert config.gen_settings(source, served(QWEN3)) == before  # min_p 0 / repetition_penalty 1: as before them
    shutil.copy(QWEN3 / "generation_config.json", tmp_path)
    edited = json.loads((tmp_path / "generation_config.json").read_text())
    (tmp_path / "generation_config.json").write_text(json.dumps({**edited, "repetition_penalty": 1.05}))
    assert config.gen_settings(source, served(tmp_path)) == {**before, "repetition_penalty": 1.05}


def test_the_cpu_engine_applies_every_field_under_its_generation_config_name():
    from shardgen.engines.transformers.args import hf_sampling
    from shardgen.generate.turns import Sampling
    from dataclasses import fields

    assert [f.name for f in fields(Sampling)] == ["max_new_tokens", *names()]
    sampled = {"max_new_tokens": 8, "temperature": 0.6, "top_p": 0.95, "top_k": -1, "min_p": 0.05,
               "repetition_penalty": 1.1}
    assert hf_sampling(sampled) == {**sampled, "top_k": 0, "do_sample": True}
    greedy = hf_sampling({**sampled, "temperature": 0.0})
    assert greedy["do_sample"] is False and greedy["repetition_penalty"] == 1.1
    assert greedy["temperature"] is greedy["top_p"] is greedy["top_k"] is greedy["min_p"] is None


def test_the_gen_key_of_a_fixed_config_is_what_it_was_before_the_fields_were_declared_once():
    """Digests computed by the code before the declaration (the hand-written fields): every row made then stays
    current. One config leaves sampling to Qwen3's generation config, one sets lists, min_p and repetition_penalty
    over a model without one."""
    from shardgen.keys import gen_key_of

    bare = Config.from_dict({"model": {"path": "m"}, "sources": [SOURCE]})
    listed = Config.from_dict({"model": {"path": "m"}, "defaults": {"temperature": 0.7, "min_p": 0.05}, "sources": [
        {**SOURCE, "sampling": {"top_k": [5, 50], "temperature": 1.0, "repetition_penalty": [1.0, 1.2]}}]})

    def key(config, model):
        return gen_key_of({"model": "fp"}, config.gen_settings(config.sources[0], model))("ab" * 32)

    assert key(bare, served(QWEN3)) == "16e5216c99503babdea203eb8dfe7e6338baf1d7dca66b229caceba60bc8045a"
    assert key(listed, served(QWEN3 / "none")) == "2c48579f392ed8a4b8aaa8a14cfdcd7cf1c73fa728d9af2dbf744b5418106e69"


def test_a_backend_refuses_at_config_time_a_field_it_cannot_apply_and_is_not_sent_one_at_neutral(monkeypatch, tmp_path):
    """As if SGLang could not apply min_p: a config that sets it away from 0 fails in Config.from_dict, naming the
    key and what the backend applies; at 0 (no effect) it passes and its requests leave it out. A generation config
    that sets it fails once the model is read (the prompts stage's sampling_for)."""
    import dataclasses

    from shardgen.engines import registry

    monkeypatch.setitem(registry.BACKENDS, "sglang", dataclasses.replace(
        registry.BACKENDS["sglang"], applies_sampling=lambda field: field.name != "min_p"))
    sglang = {"model": {"path": "m"}, "engine": {"backend": "sglang"}}
    with pytest.raises(ConfigError, match=r"defaults: min_p 0\.05 cannot be applied by the sglang backend \(it "
                                          r"applies temperature, top_p, top_k, repetition_penalty\)"):
        Config.from_dict({**sglang, "defaults": {"min_p": 0.05}, "sources": [SOURCE]})
    with pytest.raises(ConfigError, match=r"sources\[0\]\.sampling: min_p \[0\.0, 0\.1\] cannot be applied"):
        Config.from_dict({**sglang, "sources": [{**SOURCE, "sampling": {"min_p": [0.0, 0.1]}}]})
    config = Config.from_dict({**sglang, "defaults": {"min_p": 0.0}, "sources": [SOURCE]})
    assert config.sampling_for(config.sources[0], served(QWEN3))["min_p"] == 0.0
    request = {"max_new_tokens": 8, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
               "repetition_penalty": 1.0}
    assert registry.request_sampling("sglang", request) == {k: v for k, v in request.items() if k != "min_p"}
    assert registry.request_sampling("transformers", request) == request
    (tmp_path / "generation_config.json").write_text(json.dumps({"min_p": 0.1}))
    bare = Config.from_dict({**sglang, "sources": [SOURCE]})
    with pytest.raises(ConfigError, match=r"the model's generation_config\.json: min_p 0\.1 cannot be applied"):
        bare.sampling_for(bare.sources[0], served(tmp_path))
