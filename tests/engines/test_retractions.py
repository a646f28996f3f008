"""SGLang's retraction lines, read by its backend into a Retraction, and added up for the done record.

No H200 or H100 log in the repository holds a retraction, so the current line is written here exactly as SGLang
0.5.13.post1 and 0.5.17 format it (scheduler.py: `"KV cache pool is full. Retract requests. " + "#retracted_reqs:
{n}, #new_tokens_gained: {t}" + ", #mamba_num_gained: {m}" + ", #new_token_ratio: {a:.4f} -> {b:.4f}"`, logged by
the scheduler's logger as every "Decode batch" line is); the SGLang 0.4 lines are real ones, from a user's log of a
16-GPU tensor-parallel run quoted in sgl-project/sglang issue 4184."""

import pytest

from shardgen.engines import LogLine
from shardgen.engines.registry import backend
from shardgen.engines.retractions import Retraction, Retractions
from shardgen.engines.sglang.log_lines import parse_retraction
from shardgen.engines.watchdog import Watchdog

from conftest import REPO
from helpers import LOGS

CURRENT = ("[2026-12-06 04:45:10.512] KV cache pool is full. Retract requests. #retracted_reqs: 7, "
           "#new_tokens_gained: 6134, #mamba_num_gained: 21, #new_token_ratio: 0.4200 -> 0.5731")
PLAIN_MODEL = ("[2026-12-06 04:45:10.512 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
               "#new_tokens_gained: 812, #new_token_ratio: 0.4200 -> 0.4310")
# Three tensor-parallel ranks' copies of one retraction (the first lines), and rank 0's, which the excerpt
# leaves out: every rank's scheduler logs it.
COPIES = [f"[2025-03-07 21:49:33 TP{rank}] Decode out of memory happened. #retracted_reqs: 1, "
          "#new_token_ratio: 0.1474 -> 0.1845" for rank in (13, 12, 10)]
SGLANG_04 = COPIES[0].replace(" TP13]", " TP0]")


@pytest.mark.parametrize("line, expected", [
    (CURRENT, Retraction(7, 6134)),  # a hybrid model: the mamba slots gained are said too, and not needed
    (PLAIN_MODEL, Retraction(1, 812)),
    (SGLANG_04, Retraction(1, None)),  # no token count in that version
])
def test_each_version_of_the_line_is_read(line, expected):
    assert parse_retraction(line) == expected
    reading = backend("sglang").read_log_line(line)
    assert reading.retraction == expected and reading.row is None


def test_another_tensor_parallel_ranks_copy_is_not_counted_again():
    for line in COPIES:
        assert parse_retraction(line) is None and backend("sglang").read_log_line(line) == LogLine()
    dp1 = CURRENT.replace("] KV", " DP1 TP0] KV")  # a data-parallel rank retracts in its own pool: it counts
    assert parse_retraction(dp1) == Retraction(7, 6134)


def test_sglang_04s_out_of_memory_words_are_a_retraction_not_a_death():
    events = []
    watchdog = Watchdog(60, lambda event, detail: events.append(event))
    for line in (SGLANG_04, *COPIES):
        watchdog.saw(line, backend("sglang").read_log_line(line))
        assert not backend("sglang").read_log_line(line).out_of_memory
    assert events == []
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert backend("sglang").read_log_line(oom) == LogLine(out_of_memory=True)


# The H200 logs of tests/data and of the benchmarks (SGLang 0.5.13.post1 and 0.5.17); the 0.5.17 ones log
# `retraction_policy='length'` in their server_args: a setting, not an event.
REAL_LOGS = sorted(LOGS.glob("*.log")) + sorted((REPO / "benchmarks" / "results").glob("*.log"))


def test_no_line_of_the_real_logs_reads_as_a_retraction():
    lines = [line for path in REAL_LOGS for line in path.read_text(errors="replace").splitlines()]
    assert sum("retraction_policy='length'" in line for line in lines) >= 2
    assert [line for line in lines if parse_retraction(line) or backend("sglang").read_log_line(line).retraction] == []


def test_the_tally_adds_requests_and_the_tokens_lines_count():
    tally = Retractions()
    for line in (CURRENT, PLAIN_MODEL, SGLANG_04):
        tally.add(parse_retraction(line))
    assert tally.as_dict() == {"events": 3, "requests": 9, "tokens": 6946, "uncounted": 1}
    assert Retractions.of_record({"backend": "sglang", "retractions": tally.as_dict()}) == tally
    assert Retractions.of_record({"backend": "sglang"}) is None  # a done file written before they were recorded
    assert Retractions.of_record(None) is None
