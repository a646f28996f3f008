"""The engine seam: engines/ imports no stage package, nothing outside a backend's folder imports inside it, the
watchdog hears progress only through its backend's reading of a log line, and the config's backend choices and
sections come from the backend registry, so a new backend is a folder under engines/ and its env file only."""

import ast
import json
import sys
import types
from pathlib import Path

import pytest

import shardgen
from shardgen.config import schema as config_schema
from shardgen.config import Config, ConfigError
from shardgen.engines import LogLine
from shardgen.engines.registry import BACKENDS, Registration, backend, package
from shardgen.engines.watchdog import Watchdog

PACKAGE = Path(shardgen.__file__).parent
STAGES = ("generate", "merge", "prompts", "report", "tune")
DECODE = ("[2026-12-03 10:00:01.000] Decode batch, #running-req: 4, #token: 900, token usage: 0.10, cuda graph: "
          "True, gen throughput (token/s): {tps}, #queue-req: 0")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engines_import_no_stage_package():
    reached = {f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / "engines").rglob("*.py")
               for name in imported_modules(path) if name.split(".")[:2] in (["shardgen", s] for s in STAGES)}
    assert reached == set()


def test_nothing_outside_a_backends_folder_imports_inside_it():
    """A backend is its folder: the rest of the package, the interface and the other backends reach it only through
    the registry (`backend(name)`, `settings_modules()`), which imports it by name."""
    backends = {package(name) for name in BACKENDS}
    assert all((PACKAGE / "engines" / name / "engine.py").is_file() for name in BACKENDS)
    reached = {f"{path.relative_to(PACKAGE)}: {name}" for path in PACKAGE.rglob("*.py")
               for name in imported_modules(path) for inside in backends
               if (name == inside or name.startswith(f"{inside}."))
               and not path.is_relative_to(PACKAGE / Path(*inside.split(".")[1:]))}
    assert reached == set()


def test_the_watchdog_hears_progress_and_out_of_memory_through_the_backend():
    events = []
    read = backend("sglang").read_log_line
    watchdog = Watchdog(60, lambda event, detail: events.append((event, detail)))
    watchdog.last_progress = 0.0
    watchdog.saw(DECODE.format(tps="0.00"), read(DECODE.format(tps="0.00")))
    assert watchdog.last_progress == 0.0  # a decode line that generated nothing is no sign of life
    watchdog.saw(DECODE.format(tps="812.5"), read(DECODE.format(tps="812.5")))
    assert watchdog.last_progress > 0.0 and read(DECODE.format(tps="812.5")).row["gen_throughput"] == 812.5
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.16 GiB"
    watchdog.saw(oom, read(oom))
    watchdog.saw(oom, read(oom))
    assert events == [("out_of_memory", oom)]  # reported once: the first line is the cause
    assert backend("transformers").read_log_line(oom) == LogLine()  # the CPU engine's progress is its completions


def test_a_stall_is_reported_to_the_caller_and_kills_the_engine():
    events, killed = [], []
    watchdog = Watchdog(0.5, lambda event, detail: events.append(event))
    watchdog.start(lambda: killed.append(True))
    watchdog.thread.join(5)
    assert events == ["stalled"] and killed == [True]


@pytest.fixture
def vllm_registered(monkeypatch):
    """A second backend registered as a vLLM one would be: its folder engines/vllm/ (its settings module) and its env
    file."""
    settings = types.ModuleType(f"{package('vllm')}.settings")
    settings.SCHEMA = {"type": "object", "additionalProperties": False, "default": {},
                       "properties": {"enforce_eager": {"type": "boolean", "default": False}}}
    settings.upgrade = lambda engine: []
    monkeypatch.setitem(sys.modules, settings.__name__, settings)
    monkeypatch.setitem(BACKENDS, "vllm", Registration("VLLMEngine", True, "shardgen-vllm.yaml", lambda field: True))
    config_schema.schema.cache_clear()
    yield
    config_schema.schema.cache_clear()


def config(**engine) -> Config:
    return Config.from_dict({"model": {"path": "/m"}, "engine": engine, "gpus": 8,
                             "sources": [{"name": "s", "path": "x.jsonl", "format": "prompt"}]})


def test_a_registered_backend_is_a_choice_with_its_own_section(vllm_registered):
    cfg = config(backend="vllm", tp_size=2, dp_size=2, memory_share=0.8, vllm={"enforce_eager": True})
    assert cfg.engine.backend_settings == {"enforce_eager": True} and cfg.engine.gpus_per_engine == 4
    assert cfg.engine.as_dict()["vllm"] == {"enforce_eager": True} and "sglang" not in cfg.engine.as_dict()
    assert cfg.with_engine(cfg.engine.as_dict()).engine == cfg.engine
    with pytest.raises(ConfigError, match="unknown key 'engine.vllm.enforce_eagre'"):
        config(backend="vllm", vllm={"enforce_eagre": True})
    assert config_schema.schema()["properties"]["engine"]["properties"]["backend"]["enum"] == [
        "sglang", "transformers", "vllm"]


def test_the_rules_run_in_the_env_the_backend_registers():
    common = (PACKAGE.parent / "rules" / "common.smk").read_text()
    assert 'BACKEND_ENV = f"../../envs/{BACKENDS[CONFIG.engine.backend].env}"' in common
    envs = PACKAGE.parent.parent / "envs"
    assert all((envs / entry.env).is_file() for entry in BACKENDS.values())


def test_an_unregistered_backend_is_refused_with_the_registered_ones():
    with pytest.raises(ConfigError, match=r"engine.backend: 'vllm' is not one of \['sglang', 'transformers'\]"):
        config(backend="vllm")


OLD_AND_TODAY = [
    ({"mem_fraction_static": 0.8}, {"memory_share": 0.8}),
    ({"mamba_strategy": "no_radix"}, {"sglang": {"mamba_strategy": "no_radix"}}),
    ({"args": {"tp_size": 2, "dp_size": 2, "attention_backend": "fa3"}},
     {"tp_size": 2, "dp_size": 2, "args": {"attention_backend": "fa3"}}),
    ({"args": {"mem_fraction_static": 0.7}}, {"memory_share": 0.7}),
    ({"tp_size": 1, "args": {"tp_size": 4}}, {"tp_size": 4}),  # engine.args won when it reached SGLang as written
    # an old config under a tune fragment written in today's keys (Snakemake merges them key by key): the fragment's
    ({"mamba_strategy": "auto", "sglang": {"mamba_strategy": "no_radix"}}, {"sglang": {"mamba_strategy": "no_radix"}}),
    # a user's old overlay over the shipped config/config.yaml, which writes today's keys at their defaults: the
    # user's choice (Snakemake's merge keeps both spellings; the default one must not silently win)
    ({"mamba_strategy": "no_buffer", "sglang": {"mamba_strategy": "auto"}},
     {"sglang": {"mamba_strategy": "no_buffer"}}),
    ({"mem_fraction_static": 0.8, "memory_share": 0.9}, {"memory_share": 0.8}),
]


@pytest.mark.parametrize("old, today", OLD_AND_TODAY)
def test_old_spellings_read_as_todays_keys_with_a_warning(old, today, caplog):
    config_schema._OLD_SPELLINGS_SAID.clear()
    assert config(backend="sglang", **old).engine == config(backend="sglang", **today).engine
    assert "the old spelling is still read" in caplog.text


def test_an_old_spelling_is_named_once_per_process(caplog):
    config_schema._OLD_SPELLINGS_SAID.clear()
    for _ in range(3):
        config(mem_fraction_static=0.8)
    assert caplog.text.count("engine.mem_fraction_static is now engine.memory_share") == 1


def test_a_resolved_config_holds_only_todays_keys():
    raw = config(mem_fraction_static=0.8, mamba_strategy="no_buffer", args={"dp_size": 2}).raw["engine"]
    assert json.dumps(raw).count("mem_fraction_static") == 0 and "mamba_strategy" not in raw
    assert (raw["memory_share"], raw["dp_size"], raw["sglang"]) == (0.8, 2, {"mamba_strategy": "no_buffer"})
