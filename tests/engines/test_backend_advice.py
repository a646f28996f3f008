"""What `shardgen diagnose` asks a backend (engines/advice.py): its start-up pools in neutral names, and the settings
of its own that lift a bound. SGLang answers every bound; the CPU engine has none to name; a new backend's advice
reaches the report with no report/ change."""

import sys
import types
from pathlib import Path

import pytest

from shardgen.engines.registry import BACKENDS, Registration, backend, package
from shardgen.engines.advice import BOUNDS, Bound, Pools
from shardgen.engines.sglang.engine import SGLangEngine
from shardgen.report.diagnose import diagnose, read_log

LOGS = Path(__file__).parents[1] / "data" / "sglang-logs"
SAID = {"graph_limit": {"running": 2000}, "running_cap": {"graph_limit": 1024},
        "kv_admission": {"pools": Pools(mamba_gb=97.5)}, "compute": {"mamba_state_dtype": "float32"},
        "mamba_pool": {"pools": Pools(mamba_slots=513)}, "prefix_cache_unused": {"mamba_slots_per_request": 3}}


def test_sglang_reads_its_start_up_facts_as_pools():
    run = read_log(LOGS / "nh8b-no_buffer-default.log")
    assert run.pools == Pools(kv_tokens=3561008, kv_gb=54.34, mamba_slots=513, mamba_gb=48.9)
    assert backend("transformers").pools(run.facts) == Pools()  # the CPU engine reports no pools


@pytest.mark.parametrize("code", BOUNDS)
def test_sglang_names_its_own_settings_for_every_bound_and_the_cpu_engine_none(code):
    bound = Bound(code, **SAID.get(code, {}))
    lines = backend("sglang").advice(bound)
    assert lines and all(isinstance(line, str) and line for line in lines)
    assert backend("transformers").advice(bound) == []


def test_sglang_words_its_settings_by_what_it_is_told():
    advice = backend("sglang").advice
    assert advice(Bound("running_cap")) == ["raise the CUDA-graph decode limit with it (cuda_graph_max_bs / "
                                            "cuda_graph_max_bs_decode); shardgen does it when "
                                            "engine.max_running_requests is set"]
    assert "(now 1024)" in advice(Bound("running_cap", graph_limit=1024))[0]
    assert advice(Bound("compute", mamba_state_dtype="bfloat16")) == []  # already the cheaper state
    assert advice(Bound("kv_admission")) == []  # no mamba pool to shrink
    assert advice(Bound("prefix_cache_unused"))[0].startswith(
        "if the prompts share no prefix, turn the cache off: engine.sglang.mamba_strategy: no_radix (one mamba-state "
        "slot a request, so more")


@pytest.fixture
def other_backend(monkeypatch):
    """A backend that reads SGLang's log lines but names settings of its own: what the report prints is its word."""
    module = types.ModuleType(f"{package('other')}.engine")

    class OtherEngine:
        read_log_line = SGLangEngine.read_log_line
        pools = SGLangEngine.pools

        @classmethod
        def advice(cls, bound: Bound) -> list[str]:
            return [f"other.{bound.code}"]

    module.OtherEngine = OtherEngine
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(BACKENDS, "other", Registration("OtherEngine", False, "shardgen-other.yaml",
                                                        lambda field: True))


def test_the_report_prints_the_advice_of_the_backend_that_ran(other_backend):
    (sglang,) = diagnose(read_log(LOGS / "nh8b-no_buffer-default.log"))
    (other,) = diagnose(read_log(LOGS / "nh8b-no_buffer-default.log", engine="other"))
    assert sglang.code == other.code == "mamba_pool_bound" and sglang.message == other.message
    assert any("engine.sglang.mamba_strategy: no_radix" in a for a in sglang.advice)
    assert other.advice == ["other.mamba_pool"]
