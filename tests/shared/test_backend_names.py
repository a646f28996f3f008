"""The stages that run an engine or read what it did name none of SGLang's settings: report/ (the diagnosis asks the
backend for the settings that lift a bound it found: `Backend.advice`) and generate/ (the backend's OOM backoff,
its EngineInfo). SGLang's names are read from the SGLang modules' own tables, so a setting added there is checked
here too; a name shardgen's neutral engine section, RunSettings or EngineInfo also uses, or another backend also
takes, is no SGLang name."""

import dataclasses
import re
from pathlib import Path

import shardgen
from shardgen.config.sections import EngineConfig
from shardgen.engines import EngineInfo, RunSettings
from shardgen.engines.sglang import args, record, running_cap, settings, versions
from shardgen.engines.transformers import args as cpu_args

PACKAGE = Path(shardgen.__file__).parent
CHECKED = ("report", "generate")


def sglang_setting_names() -> set[str]:
    """SGLang's server arguments as shardgen passes, reads back and records them, its `engine.sglang` keys, and the
    old spellings its settings module still reads."""
    names = {*args.LOGGED_FIELDS, *args.MEMORY_LAYOUT_ARGS, *record.RESOLVED_KEYS, *running_cap.USER_SIZING_ARGS,
             *versions.PREFILL_GRAPHS_OFF, *settings.RENAMED, *settings.LIFTED_ARGS}
    names |= {field for spelling in versions.SPELLINGS for field in (spelling.mamba_strategy, spelling.graph_limit)}
    neutral = {f.name for cls in (EngineConfig, RunSettings, EngineInfo) for f in dataclasses.fields(cls)}
    return names - neutral - set(cpu_args.KNOWN_ARGS)


def named_in(text: str, names: set[str]) -> set[str]:
    """The names a text holds as words (`mem_fraction_static`, not part of `engine_mem_fraction_static_x`), and the
    `engine.sglang` section's keys."""
    words = {m for m in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if m in names}
    return words | set(re.findall(r"engine\.sglang(?:\.\w+)?", text))


def test_the_names_are_sglangs_own_and_leave_the_neutral_ones_out():
    names = sglang_setting_names()
    assert {"mem_fraction_static", "cuda_graph_max_bs", "cuda_graph_max_bs_decode", "mamba_scheduler_strategy",
            "mamba_radix_cache_strategy", "max_mamba_cache_size", "disable_radix_cache", "chunked_prefill_size",
            "mamba_full_memory_ratio", "mamba_ssm_dtype"} <= names
    assert names.isdisjoint({"max_running_requests", "tp_size", "dp_size", "mamba_strategy", "version", "dtype"})
    assert named_in("set engine.sglang.mamba_strategy: no_radix, or cuda_graph_max_bs=8 (mem_fraction_staticx)",
                    names) == {"engine.sglang.mamba_strategy", "cuda_graph_max_bs"}


def test_report_and_generate_name_no_sglang_setting():
    names = sglang_setting_names()
    files = sorted(path for stage in CHECKED for path in (PACKAGE / stage).rglob("*.py"))
    assert len(files) > 20  # both stages found
    named = {f"{path.relative_to(PACKAGE)}: {name}" for path in files for name in named_in(path.read_text(), names)}
    assert named == set()
