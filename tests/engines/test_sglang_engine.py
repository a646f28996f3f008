"""The real SGLang adapter against tests/fake_sglang (no GPU: nothing here claims one ran)."""

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardgen.cli import main
from shardgen.config import Config, ConfigError
from shardgen.engines.sglang.args import build_server_args, logged_server_args, run_settings
from shardgen.layout import Layout
from shardgen.prompts.stage import build_prompts
from shardgen.model.target import ModelInfo
from shardgen.prompts.split import split

from helpers import SGLANG_VERSIONS, run_generate, server_arg_fields

ABORT_TOKEN = 666  # the fake scheduler aborts prompts holding this id
V0513, V0517 = "0.5.13.post1", "0.5.17"  # the ServerArgs fields of each, read from its wheel (helpers)


def config(**engine) -> Config:
    return Config.from_dict({"model": {"path": "/m"}, "engine": engine, "seed": 5,
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def server_args(cfg: Config, version: str) -> dict:
    return build_server_args(cfg.engine, "/m", server_arg_fields(version), version, seed=cfg.seed,
                             trust_remote_code=cfg.model.trust_remote_code)


def test_strategy_and_graph_limit_follow_the_installed_field_names():
    old = server_args(config(mamba_strategy="no_buffer", max_running_requests=512), V0513)
    assert old["mamba_scheduler_strategy"] == "no_buffer" and old["cuda_graph_max_bs"] == 512
    assert "disable_overlap_schedule" not in old  # 0.5.13 switches overlap off itself
    assert (old["random_seed"], old["log_level"], old["mem_fraction_static"]) == (5, "info", 0.90)
    new = server_args(config(mamba_strategy="no_buffer", max_running_requests=512), V0517)
    assert new["mamba_radix_cache_strategy"] == "no_buffer" and new["cuda_graph_max_bs_decode"] == 512
    assert new["disable_overlap_schedule"] is True  # asserted by SGLang from 0.5.14
    assert "cuda_graph_max_bs_decode" not in server_args(config(mamba_strategy="no_buffer"), V0517)


def test_auto_never_reaches_sglang_unresolved():
    # SGLang has its own `auto` strategy (no_buffer or extra_buffer, the prefix cache on): passing shardgen's
    # through would silently run another choice than the one recorded.
    with pytest.raises(ValueError, match="unresolved"):
        server_args(config(), V0517)


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_no_radix_disables_the_prefix_cache_and_sets_no_strategy(version):
    args = server_args(config(mamba_strategy="no_radix"), version)
    assert args["disable_radix_cache"] is True
    assert not {"mamba_scheduler_strategy", "mamba_radix_cache_strategy", "disable_overlap_schedule"} & set(args)


def test_extra_buffer_keeps_overlap_and_old_spellings_are_translated():
    args = server_args(config(mamba_strategy="extra_buffer", args={"cuda_graph_max_bs": 384}), V0517)
    assert args["mamba_radix_cache_strategy"] == "extra_buffer" and "disable_overlap_schedule" not in args
    assert args["cuda_graph_max_bs_decode"] == 384 and "cuda_graph_max_bs" not in args


def test_unknown_argument_fails_naming_it_and_the_closest_names():
    with pytest.raises(ConfigError, match=r"does not know 'attention_backends' \(closest: attention_backend"):
        server_args(config(mamba_strategy="no_buffer", args={"attention_backends": "fa3"}), V0517)


def test_logged_and_resolved_arguments_are_read_back_under_either_name():
    old = logged_server_args("[2026-12-02 10:00:00] server_args=ServerArgs(model_path='/m', disable_radix_cache=False, "
                             "cuda_graph_max_bs=256, mamba_scheduler_strategy='no_buffer', dtype='auto')")
    new = logged_server_args("[2026-12-02 10:00:00] server_args=ServerArgs(model_path='/m', "
                             "cuda_graph_max_bs_decode=512, mamba_radix_cache_strategy='extra_buffer', "
                             "mamba_ssm_dtype='bfloat16')")
    assert old == {"disable_radix_cache": "False", "cuda_graph_max_bs": "256", "mamba_scheduler_strategy": "no_buffer",
                   "dtype": "auto"}
    old_settings, new_settings = run_settings(old), run_settings(new)
    assert (old_settings.mamba_strategy, old_settings.graph_limit, old_settings.weights_dtype) == (
        "no_buffer", 256, None)
    assert old_settings.mamba_slots_per_request == 3
    assert (new_settings.mamba_strategy, new_settings.graph_limit, new_settings.ssm_state_dtype) == (
        "extra_buffer", 512, "bfloat16")
    assert run_settings({"disable_radix_cache": True, "mamba_radix_cache_strategy": "no_buffer"}).mamba_strategy == \
        "no_radix"
    assert run_settings({"cuda_graph_max_bs_decode": None}).graph_limit is None
    assert logged_server_args("[2026-12-02 10:00:00] Load weight end.") is None


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_generate_through_the_adapter(make_config, write_jsonl, version, monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(Path(write_jsonl("x", [])).parent / "locks"))
    rows = [{"query": f"Question {i}: " + "why " * i} for i in range(40)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                      engine={"backend": "sglang", "mamba_strategy": "no_buffer", "max_running_requests": 6,
                              "inflight": 2.0, "args": {}},
                      gpus=1, checkpoint={"every_records": 8, "every_seconds": 1})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    proc = run_generate(cfg, 0, version)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Decode batch" in proc.stderr  # scheduler lines still reach the job's log

    parts = duckdb.sql(f"SELECT * FROM '{layout.shard_dir(0)}/part-*.parquet'").fetchdf()
    assert len(parts) == 40 and parts["prompt_id"].is_unique
    assert set(parts["finish_reason"]) == {"stop", "length"}
    stop_id = ModelInfo(Path(cfg.model.path)).stop_token_ids[-1]  # the fake matches the last stop id
    assert all(ids[-1] == stop_id for ids in parts[parts.finish_reason == "stop"]["output_ids"])
    assert (parts["completion_tokens"] == parts["output_ids"].map(len)).all()
    assert set(parts["gpu"]) == {"0"}

    done = json.loads(layout.done(0).read_text())
    engine = done["engine"]
    assert engine["backend"] == "sglang" and engine["version"] == version and engine["max_running_requests"] == 6
    assert engine["startup"] == {"max_mamba_cache_size": 18, "mamba_pool_gb": 10.0, "kv_pool_tokens": 100000,
                                 "kv_pool_gb": 2.0, "max_total_num_tokens": 100000, "max_running_requests": 6}
    strategy = "mamba_scheduler_strategy" if version.startswith("0.5.13") else "mamba_radix_cache_strategy"
    assert engine["resolved"][strategy] == "no_buffer" and "mamba_strategy_auto" not in engine  # as configured

    telemetry = duckdb.sql(
        f"SELECT kind, count(*) n, max(running) running, max(mamba_usage) mamba FROM "
        f"'{layout.shard_dir(0)}/telemetry-*.parquet' GROUP BY kind").fetchall()
    kinds = {k: (n, running, mamba) for k, n, running, mamba in telemetry}
    assert kinds["decode"][1:] == (6, 0.66) and kinds["prefill"][0] == 1 and kinds["client"][0] >= 1

    # the shard's telemetry and done file are enough to diagnose it: the cap of 6 is the fake's 18 mamba slots / 3
    assert main(["--results", str(layout.root), "diagnose", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)[str(layout.shard_dir(0))]
    assert [f["code"] for f in result["findings"]] == ["mamba_pool_bound"]
    assert engine["gpu_name"] is None and result["efficiency"] is None  # no CUDA here: no GPU name, no peaks
    assert main(["--results", str(layout.root), "diagnose", "--json", "--model", cfg.model.path,
                 "--gpu", "NVIDIA H200"]) == 0  # named: the shard's telemetry and the model's config give it
    eff = json.loads(capsys.readouterr().out)[str(layout.shard_dir(0))]["efficiency"]
    assert eff["peak_tbps"] == 4.8 and eff["running"] == 6 and eff["achieved_tbps"] > 0


def test_aborted_request_is_recorded_with_the_engine_message(make_config, write_jsonl, monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SHARDGEN_GPU_LOCK_DIR", str(tmp_path / "locks"))
    rows = [{"query": "hello"}, {"query": "world"}]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response"}],
                      engine={"backend": "sglang", "args": {}}, gpus=1)
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    table = pq.read_table(layout.prompts)
    ids = table["prompt_ids"].to_pylist()
    ids[0] = ids[0] + [ABORT_TOKEN]
    column = pa.array(ids, table.schema.field("prompt_ids").type)
    layout.split_dir.mkdir(parents=True)
    pq.write_table(table.set_column(table.schema.get_field_index("prompt_ids"), "prompt_ids", column), layout.split(0))
    proc = run_generate(cfg, 0, "0.5.17")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["prompt_id"]: r for p in layout.shard_dir(0).glob("part-*.parquet") for r in pq.read_table(p).to_pylist()}
    aborted = rows[table["prompt_id"][0].as_py()]
    assert aborted["finish_reason"] == "abort" and aborted["error"] == "fake scheduler aborted it"
    assert rows[table["prompt_id"][1].as_py()]["finish_reason"] in ("stop", "length")
    done = json.loads(layout.done(0).read_text())
    assert (done["generated"], done["failed"]) == (1, 1)


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_the_gpu_demo_overlay_maps_onto_every_version(version):
    from conftest import REPO, load_yaml_files

    raw = load_yaml_files(*(REPO / "config" / n for n in ("config.yaml", "demo.yaml", "demo-sglang.yaml")))
    cfg = Config.from_dict(raw)
    args = server_args(cfg, version)
    assert args["attention_backend"] == "fa3" and args["mem_fraction_static"] == 0.5 and cfg.n_shards == 2


def test_capture_sends_the_logprob_arguments_and_reads_meta_info(fake_sglang, monkeypatch, tmp_path):
    """The adapter asks the fake SGLang for the chosen token's logprob and the top k, output tokens only, and
    reads output_token_logprobs / output_top_logprobs into the Result (the matched stop token's included)."""
    from types import SimpleNamespace

    import sglang

    from shardgen.capture import Capture
    from shardgen.engines import Request
    from shardgen.engines.sglang.engine import SGLangEngine
    from shardgen.engines.sglang.results import capture_args

    assert capture_args(None) == {}
    assert capture_args(Capture(20)) == {"return_logprob": True, "top_logprobs_num": 20, "logprob_start_len": -1}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake = sglang.Engine(model_path="/m")
    adapter = SGLangEngine.__new__(SGLangEngine)  # the request path only: no start-up
    adapter.engine, adapter.stop_ids, adapter.extra_sampling, adapter.watchdog = fake, [7, 9], {}, None
    adapter.hidden = None  # capture.hidden_states off
    adapter.telemetry = SimpleNamespace(completed=lambda n: None)
    try:
        for k, prompt in ((3, [1, 2, 3]), (0, [1, 2])):  # odd length: stops on 9; even: cut by length
            adapter.capture = Capture(k)
            result = fake.loop.run_until_complete(adapter.generate(Request(f"r{k}", prompt, {"max_new_tokens": 4})))
            assert fake.logprob_args[-1] == {"return_logprob": True, "top_logprobs_num": k, "logprob_start_len": -1}
            assert len(result.logprobs) == len(result.top_ids) == len(result.output_ids)
            assert result.output_ids[-1] == (9 if len(prompt) % 2 else result.output_ids[-1])
            assert result.logprobs[:2] == [-0.05, -0.3]
            assert [len(ids) for ids in result.top_ids] == [k] * len(result.output_ids)
            if k:
                assert [ids[0] for ids in result.top_ids] == result.output_ids
                assert result.top_logprobs[0] == [-0.05, -1.05, -2.05]
        adapter.capture = Capture(2, frozenset({"b"}))  # one source captured: another's request asks for nothing
        for source, asked in (("a", False), ("b", True)):
            result = fake.loop.run_until_complete(
                adapter.generate(Request(f"from-{source}", [1, 2], {"max_new_tokens": 4}, source)))
            assert fake.logprob_args[-1]["return_logprob"] is asked and (result.logprobs is not None) is asked
        adapter.capture = Capture(2, frozenset({"b"}), signal=True)  # the signal: the chosen logprob, no top k
        result = fake.loop.run_until_complete(adapter.generate(Request("signal", [1, 2], {"max_new_tokens": 4}, "a")))
        assert fake.logprob_args[-1] == {"return_logprob": True, "top_logprobs_num": 0, "logprob_start_len": -1}
        assert len(result.logprobs) == len(result.output_ids) and result.top_ids is None
        adapter.capture = None
        result = fake.loop.run_until_complete(adapter.generate(Request("off", [1, 2], {"max_new_tokens": 4})))
        assert fake.logprob_args[-1]["return_logprob"] is False and result.logprobs is None
    finally:
        fake.shutdown()
