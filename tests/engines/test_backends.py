"""The backend registry and what each backend owns: its lazy import, its OOM backoff on typed settings, its done
record read back as an EngineInfo, and what in its settings changes the model's numerics."""

import json
import subprocess
import sys

import pytest

from shardgen.config import Config
from shardgen.engines import EngineInfo, RunSettings
from shardgen.engines.registry import BACKENDS, backend, info_from_record


def engine_config(**engine):
    return Config.from_dict({"model": {"path": "/m"}, "engine": engine,
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]}).engine


def test_backends_are_imported_only_when_asked_for():
    code = ("import sys, shardgen.engines.registry as e, shardgen.generate.attempts, shardgen.report.diagnose, "
            "shardgen.tune.report\n"
            "def loaded(): return sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'torch', "
            "'transformers') or m.startswith('shardgen.engines.') and m.endswith('.engine'))\n"
            "print(loaded())\n"
            "e.backend('transformers')\n"
            "print([m for m in loaded() if m.startswith('shardgen')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "['shardgen.engines.transformers.engine']"]


def test_an_unknown_backend_names_the_registered_ones():
    with pytest.raises(ValueError, match="unknown backend 'vllm' \\(registered: sglang, transformers\\)"):
        backend("vllm")
    assert set(BACKENDS) == {"sglang", "transformers"}


def test_sglang_backs_off_memory_and_the_cap_per_oom_death():
    sglang = backend("sglang")
    cfg = engine_config(backend="sglang", max_running_requests=8, memory_share=0.9)
    after = sglang.after_oom(cfg, 2, last_cap=None)
    assert (after.memory_share, after.max_running_requests) == (0.84, 4)  # 8 x 0.75^2 = 4.5
    assert after.args == cfg.args and after.backend == "sglang"
    left_to_sglang = engine_config(backend="sglang")
    assert sglang.after_oom(left_to_sglang, 1, last_cap=512).max_running_requests == 384  # the cap it reported
    assert sglang.after_oom(left_to_sglang, 1, last_cap=None).max_running_requests is None


def test_transformers_backs_off_its_batch_only():
    cfg = engine_config(backend="transformers")
    after = backend("transformers").after_oom(cfg, 1, last_cap=None)
    assert after.max_running_requests == 6 and after.memory_share == cfg.memory_share  # batch 8


def test_a_done_record_reads_back_as_an_engine_info_in_neutral_names():
    record = {"backend": "sglang", "version": "0.5.17", "max_running_requests": 12, "gpu_name": "NVIDIA H200",
              "startup": {"max_mamba_cache_size": 36}, "server_args": {},
              "resolved": {"disable_radix_cache": True, "cuda_graph_max_bs_decode": 512,
                           "mamba_ssm_dtype": "bfloat16", "dtype": "auto"}}
    info = info_from_record(record)
    assert info == EngineInfo("sglang", 12, "0.5.17", "NVIDIA H200", {"max_mamba_cache_size": 36},
                              RunSettings(mamba_strategy="no_radix", prefix_cache=False, mamba_slots_per_request=1,
                                          graph_limit=512, ssm_state_dtype="bfloat16"), record)
    cpu = info_from_record({"backend": "transformers", "max_running_requests": 8, "device": "cpu",
                            "dtype": "float32"})
    assert (cpu.max_running_requests, cpu.settings.weights_dtype, cpu.settings.mamba_strategy) == (8, "float32", None)


@pytest.mark.parametrize("args, model_state, changes", [
    ({"mamba_ssm_dtype": "bfloat16"}, None, ["mamba_ssm_dtype bfloat16 (the model's SSM state is float32)"]),
    ({"mamba_ssm_dtype": "bfloat16"}, "bfloat16", []),  # the model's own config keeps a bfloat16 state
    ({"mamba_ssm_dtype": "float32"}, None, []),
    ({"kv_cache_dtype": "fp8_e4m3"}, None, ["kv_cache_dtype fp8_e4m3 (attention keys and values quantized)"]),
    ({"mamba_full_memory_ratio": 8.0}, None, []),
])
def test_numerics_changes_are_judged_against_the_model(tmp_path, args, model_state, changes):
    (tmp_path / "config.json").write_text(json.dumps({"mamba_ssm_dtype": model_state} if model_state else {}))
    engine = engine_config(backend="sglang", args=args).as_dict()
    assert backend("sglang").numerics_changes(engine, tmp_path) == changes


@pytest.mark.parametrize("dtype, expected", [
    ("float32", {"dtype": "float32", "kv_cache_dtype": "float32", "ssm_state_dtype": "float32",
                 "conv_state_dtype": "float32"}),
    # HF keeps NemotronH's SSM state in float32 under bfloat16 weights: read from the cache, not assumed.
    ("bfloat16", {"dtype": "bfloat16", "kv_cache_dtype": "bfloat16", "ssm_state_dtype": "float32",
                  "conv_state_dtype": "bfloat16"})])
def test_the_cpu_engine_records_the_dtypes_it_runs_with(make_config, tmp_path, dtype, expected):
    from shardgen.engines.transformers.engine import TransformersEngine
    from shardgen.merge.provenance import engine_numerics
    from shardgen.model.target import ModelInfo

    config = make_config([{"name": "s", "path": "x.jsonl", "format": "prompt"}], engine={"args": {"dtype": dtype}})
    model = ModelInfo.from_config(config.model)
    engine = TransformersEngine(config, model, tmp_path, device="cpu")
    record = json.loads(json.dumps(engine.info.record))  # as the done file keeps it
    assert {k: record.get(k) for k in expected} == expected and "dtypes_note" not in record
    settings = info_from_record(record).settings
    assert (settings.weights_dtype, settings.kv_cache_dtype, settings.ssm_state_dtype) == (
        dtype, expected["kv_cache_dtype"], expected["ssm_state_dtype"])
    assert engine_numerics(record, model.path) == {"backend": "transformers", "weights": dtype,
                                                   "kv": expected["kv_cache_dtype"],
                                                   "ssm_state": expected["ssm_state_dtype"]}
