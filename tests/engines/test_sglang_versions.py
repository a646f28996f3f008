"""Every server argument shardgen can pass exists in the ServerArgs of SGLang 0.5.13.post1, 0.5.17 and 0.5.23, read
from each wheel's source (tests/data/sglang-server-args, made by fields_from_wheel.py there); no GPU, no download.
The arguments come from the code itself: each strategy, cap and data-parallel size through build_server_args, every
`shardgen tune` variant, the shipped config files' engine.args, every spelling in engines/sglang/versions.py's table,
and `auto`'s sizing through the adapter on the fake SGLang of that version."""

import importlib.util
import logging
import zipfile
from pathlib import Path

import pytest
import yaml

from shardgen.config import Config, ConfigError
from shardgen.engines.sglang import tune
from shardgen.engines.sglang.args import build_server_args
from shardgen.engines.sglang.settings import STRATEGIES
from shardgen.engines.sglang.versions import SPELLINGS, spelling, untested

from helpers import SERVER_ARGS, SGLANG_VERSIONS, server_arg_fields

REPO = Path(__file__).resolve().parents[2]


def config(engine: dict) -> Config:
    return Config.from_dict({"model": {"path": "/m"}, "engine": {"backend": "sglang", **engine}, "seed": 5,
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def passed(cfg: Config, version: str) -> dict:
    return build_server_args(cfg.engine, "/m", server_arg_fields(version), version, seed=cfg.seed,
                             trust_remote_code=False)


def engine_settings() -> dict[str, Config]:
    """Every engine section whose server arguments do not depend on the work, by a name saying where it comes from."""
    settings = {f"{strategy} cap {cap} dp {dp}": config({"sglang": {"mamba_strategy": strategy},
                                                        "max_running_requests": cap, "dp_size": dp})
                for strategy in STRATEGIES if strategy != "auto" for cap in (None, 64) for dp in (1, 2)}
    base = config({"sglang": {"mamba_strategy": "no_buffer"}})
    for name, variant in tune.grid(base.engine.as_dict(), [256, 1024], bf16_state=True).items():
        settings[f"tune {name}"] = base.with_engine(variant)
    for path in sorted((REPO / "config").glob("*.yaml")):
        if args := (yaml.safe_load(path.read_text()).get("engine") or {}).get("args"):
            settings[f"{path.name} engine.args"] = config({"sglang": {"mamba_strategy": "no_radix"}, "args": args})
    for names in SPELLINGS:  # a user's engine.args in any version's spelling
        field, off = names.prefill_graphs_off
        settings[f"engine.args as spelled from {names.since}"] = config({
            "sglang": {"mamba_strategy": "no_buffer"},
            "args": {names.mamba_strategy: "no_buffer", names.graph_limit: 128, field: off}})
    return settings


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_the_table_names_what_each_wheel_has(version):
    fields, names = server_arg_fields(version), spelling(version)
    assert {names.mamba_strategy, names.graph_limit, names.prefill_graphs_off[0]} <= fields
    others = {n for s in SPELLINGS if s != names for n in (s.mamba_strategy, s.graph_limit, s.prefill_graphs_off[0])}
    assert not others & fields  # the other range's names are not this version's: the table's boundary holds


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_every_argument_shardgen_passes_exists_in_that_version(version):
    fields, names = server_arg_fields(version), spelling(version)
    passed_keys = {name: set(passed(cfg, version)) for name, cfg in engine_settings().items()}
    unknown = {name: sorted(keys - fields) for name, keys in passed_keys.items() if keys - fields}
    assert not unknown
    every = set().union(*passed_keys.values())
    assert {names.mamba_strategy, names.graph_limit, names.prefill_graphs_off[0], "dp_size",
            "mamba_full_memory_ratio", "mamba_ssm_dtype", "attention_backend"} <= every


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_the_sizing_of_auto_passes_arguments_that_version_has(fake_sglang, demo_model, monkeypatch, tmp_path, caplog,
                                                              version):
    """`auto` on single turns (no_radix, a sized cap) and on each_turn conversations (no_buffer, a sized state pool
    and prefill bound), through the adapter on the fake SGLang of `version`, which refuses any other field."""
    from shardgen.engines.sglang.engine import SGLangEngine
    from shardgen.model.target import ModelInfo

    monkeypatch.setenv("FAKE_SGLANG_VERSION", version)
    monkeypatch.setenv("FAKE_SGLANG_GPU_MIB", "81559")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = Config.from_dict({"model": {"path": str(demo_model)}, "engine": {"backend": "sglang"}, "gpus": 1,
                            "results_dir": str(tmp_path / "results"),
                            "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})
    single = [{"prompt_ids": [5] * 40, "max_new_tokens": 64} for _ in range(8)]
    each_turn = [{**row, "turns": [{}, {}, {}], "turn": 1} for row in single]
    started = {}
    for name, work in (("single", single), ("each_turn", each_turn)):
        with caplog.at_level(logging.WARNING):
            engine = SGLangEngine(cfg, ModelInfo.from_config(cfg.model), tmp_path / name, work=work)
        engine.close()
        started[name] = engine
        assert set(engine.args) <= server_arg_fields(version)
    names = spelling(version)
    single_args, each_turn_args = started["single"].args, started["each_turn"].args
    assert single_args["disable_radix_cache"] is True
    assert single_args["max_running_requests"] == single_args[names.graph_limit] == \
        started["single"].cap_auto.max_running_requests
    assert each_turn_args[names.mamba_strategy] == "no_buffer"
    assert each_turn_args["max_mamba_cache_size"] == started["each_turn"].cap_auto.max_mamba_cache_size
    assert each_turn_args["prefill_max_requests"] == started["each_turn"].prefill_auto.prefill_max_requests
    warned = [r.message for r in caplog.records if "not a version shardgen was run with" in r.message]
    assert bool(warned) == (untested(version) is not None) == (version == "0.5.23")


def test_the_prefill_graph_switch_follows_the_rename():
    demo = config({"sglang": {"mamba_strategy": "no_radix"}, "args": {"disable_piecewise_cuda_graph": True}})
    assert passed(demo, "0.5.13.post1")["disable_piecewise_cuda_graph"] is True
    assert passed(demo, "0.5.17")["cuda_graph_backend_prefill"] == "disabled"
    assert "disable_piecewise_cuda_graph" not in passed(demo, "0.5.23")
    left_on = config({"sglang": {"mamba_strategy": "no_radix"}, "args": {"disable_piecewise_cuda_graph": False}})
    assert not {"disable_piecewise_cuda_graph", "cuda_graph_backend_prefill"} & set(passed(left_on, "0.5.23"))
    breakable = config({"sglang": {"mamba_strategy": "no_radix"}, "args": {"cuda_graph_backend_prefill": "breakable"}})
    assert passed(breakable, "0.5.17")["cuda_graph_backend_prefill"] == "breakable"
    with pytest.raises(ConfigError, match=r"engine.args.cuda_graph_backend_prefill: 'breakable' has no counterpart "
                                          r"in SGLang 0.5.13.post1"):
        passed(breakable, "0.5.13.post1")


def test_versions_choose_their_range():
    assert [spelling(v).mamba_strategy for v in ("0.5.12.post1", "0.5.13.post1", "0.5.14", "0.5.23", "0.6.0rc1")] \
        == ["mamba_scheduler_strategy"] * 2 + ["mamba_radix_cache_strategy"] * 3
    # unknown, or SGLang's version of an unbuilt source tree: the newest names, checked against its fields
    assert spelling(None) == spelling("dev") == spelling("0.0.0.dev0") == SPELLINGS[0] != spelling("0.5.13.post1")


def _fields_from_wheel():
    spec = importlib.util.spec_from_file_location("fields_from_wheel", SERVER_ARGS / "fields_from_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fields


def _wheel(path: Path, files: dict[str, str]) -> zipfile.ZipFile:
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return zipfile.ZipFile(path)


def test_fields_are_read_from_a_dataclass_and_from_msgspec_namespaces(tmp_path):
    fields = _fields_from_wheel()
    dataclass = _wheel(tmp_path / "old.whl", {"sglang/srt/server_args.py": (
        "import dataclasses\nfrom typing import ClassVar\n@dataclasses.dataclass\nclass ServerArgs:\n"
        "    model_path: str\n    mamba_scheduler_strategy: str = 'auto'\n    LIMIT: ClassVar[int] = 3\n"
        "    def check(self):\n        local: int = 1\n")})
    assert fields(dataclass) == ["model_path", "mamba_scheduler_strategy"]
    namespaces = _wheel(tmp_path / "new.whl", {
        "sglang/srt/server_args.py": (
            "from sglang.srt.arg_groups.fields.schedule import (\n    Schedule,\n)\n"
            "from sglang.srt.arg_groups.fields.exec_ import ExecMamba\n"
            "class ServerArgs:\n    def __post_init__(self):\n        pass\n"
            "_INPUT_NAMESPACES = [Schedule, ExecMamba]\n"),
        "sglang/srt/arg_groups/fields/schedule.py": (
            "class Schedule(msgspec.Struct):\n    _NS_PATH = 'schedule'\n    max_running_requests: A[int, 'x'] = None\n"
            "    _explicitly_set: A[bool, Arg(no_cli=True)] = False\n"),
        "sglang/srt/arg_groups/fields/exec_.py": (
            "class Other(msgspec.Struct):\n    unlisted: int = 0\n"
            "class ExecMamba(msgspec.Struct):\n    mamba_radix_cache_strategy: A[str, 'y'] = 'auto'\n")})
    assert fields(namespaces) == ["max_running_requests", "_explicitly_set", "mamba_radix_cache_strategy"]


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_each_fixture_names_the_wheel_it_was_read_from(version):
    header = (SERVER_ARGS / f"{version}.txt").read_text().splitlines()[0]
    assert header.startswith(f"# ServerArgs field names of sglang-{version}-") and "sha256" in header
    assert {"model_path", "max_running_requests", "max_mamba_cache_size"} <= server_arg_fields(version)
