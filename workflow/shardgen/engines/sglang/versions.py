"""What each range of SGLang versions calls the server arguments shardgen sets, one row a range, chosen from the
installed SGLang's version. tests/engines/test_sglang_versions.py checks every argument shardgen can pass against
the ServerArgs fields of 0.5.13.post1, 0.5.17 and 0.5.23, read from each wheel's source (tests/data/sglang-server-args).

From 0.5.14 (sgl-project/sglang#27418 and the CUDA-graph settings' regrouping), three names changed: the mamba prefix
cache strategy (`mamba_scheduler_strategy` -> `mamba_radix_cache_strategy`), the largest decode batch captured in
CUDA graphs (`cuda_graph_max_bs` -> `cuda_graph_max_bs_decode`), and turning prefill (piecewise) CUDA graphs off
(`disable_piecewise_cuda_graph=True` -> `cuda_graph_backend_prefill="disabled"`). The old names stayed command-line
aliases through 0.5.17 and are gone in 0.5.23; as Engine keywords they are refused from 0.5.14. From 0.5.14
`no_buffer` also asserts that overlap scheduling is off where 0.5.13 turned it off itself.

The same in the three wheels, read from their source: the strategies (`extra_buffer_lazy` is in 0.5.13.post1
already) and the state slots each holds a running request (args.SLOTS_PER_REQUEST); the state pool: one slot
a request of max_running_requests (and one for padding) when the prefix cache is off and a cap is given,
max_mamba_cache_size slots when that is given, else mamba_full_memory_ratio's share of memory (sgl-project/sglang#33004
asked for the cap to size it under the prefix cache too; 0.5.23 does not, so shardgen passes max_mamba_cache_size
there). SGLang's own `auto` strategy (no_buffer up to 0.5.13, extra_buffer from 0.5.14 with overlap on, for
Nemotron-H) never applies: shardgen resolves its `auto` itself and names a strategy, or turns the prefix cache off,
where SGLang ignores the strategy."""

import re
from dataclasses import dataclass

from shardgen.config import ConfigError


@dataclass(frozen=True)
class Spelling:
    """The ServerArgs names of one range of SGLang versions, from `since` up to the next row's."""
    since: str
    mamba_strategy: str  # the mamba prefix cache's strategy
    graph_limit: str  # the largest decode batch run with CUDA graphs
    prefill_graphs_off: tuple[str, object]  # the field and value that turn prefill (piecewise) CUDA graphs off
    no_buffer_overlap_off: bool  # no_buffer needs disable_overlap_schedule passed (asserted, not set, by SGLang)


SPELLINGS = (  # newest first
    Spelling("0.5.14", "mamba_radix_cache_strategy", "cuda_graph_max_bs_decode",
             ("cuda_graph_backend_prefill", "disabled"), no_buffer_overlap_off=True),
    Spelling("0", "mamba_scheduler_strategy", "cuda_graph_max_bs",
             ("disable_piecewise_cuda_graph", True), no_buffer_overlap_off=False),
)
TESTED = ("0.5.13.post1", "0.5.17")  # run end to end on a GPU (docs/engine.md: SGLang versions)
# Every spelling of each renamed field, newest first: what a log line, a done record or a user's engine.args may hold.
STRATEGY_FIELDS = tuple(s.mamba_strategy for s in SPELLINGS)
GRAPH_LIMIT_FIELDS = tuple(s.graph_limit for s in SPELLINGS)
PREFILL_GRAPHS_OFF = dict(s.prefill_graphs_off for s in SPELLINGS)


def _release(version: str) -> tuple[int, ...]:
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match[0].split(".")) if match else ()


def spelling(version: str | None) -> Spelling:
    """The names of this SGLang version (its __version__). One that does not parse, or SGLang's 0.0.0.dev0 of a
    source tree without build metadata, gets the newest names; args.check_known refuses any it lacks."""
    release = _release(version or "")
    if not any(release):
        return SPELLINGS[0]
    return next(s for s in SPELLINGS if release >= _release(s.since))


def untested(version: str | None) -> str | None:
    """A warning for an SGLang version shardgen has not run on a GPU, else None."""
    if version in TESTED:
        return None
    return (f"SGLang {version} is not a version shardgen was run with on a GPU ({', '.join(TESTED)}): the server "
            "arguments are named for it, its sizing and throughput are not measured")


def translate(key: str, value, names: Spelling, version: str | None) -> tuple[str, object] | None:
    """An engine.args entry under this version's name: a renamed field's other spelling becomes this one's; a
    prefill-graph switch left at its default is dropped (None). Any other key is returned as it is."""
    for family in (STRATEGY_FIELDS, GRAPH_LIMIT_FIELDS):
        if key in family:
            return getattr(names, "mamba_strategy" if family is STRATEGY_FIELDS else "graph_limit"), value
    field, off = names.prefill_graphs_off
    if key not in PREFILL_GRAPHS_OFF or key == field:
        return key, value
    if value == PREFILL_GRAPHS_OFF[key]:
        return field, off
    if value in (None, False):
        return None
    raise ConfigError(f"engine.args.{key}: {value!r} has no counterpart in SGLang {version}, which turns prefill "
                      f"CUDA graphs off with {field}={off!r} and has no {key}")
