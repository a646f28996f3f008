"""`shardgen diagnose` on retractions and on a prefix cache that is on but serves little: the prefill-heavy reading of
a real multi-turn H200 log (SGLang 0.5.17) names the cache instead of advising to keep it, a shard's per-turn record
judges it against what later turns share, and retraction lines become a finding with what they cost."""

from pathlib import Path

from shardgen.engines import RunSettings
from shardgen.engines.retractions import Retractions
from shardgen.report.diagnose_rules import diagnose
from shardgen.report.diagnose_run import Run, read_log

from conftest import REPO

MULTI_TURN = REPO / "benchmarks" / "results" / "2026-12-06-h200-defaults-multi-turn-partial.log"
SERVER_ARGS = ("[2026-12-06 04:41:27.011] server_args=ServerArgs(model_path='/root/model/nh8b', "
               "disable_radix_cache={radix}, mamba_radix_cache_strategy='{strategy}', "
               "cuda_graph_max_bs_decode=256)")
# Later in the same run's log, as its last Decode line (the real log ends before the next one came).
NEXT_DECODE = ("[2026-12-06 04:49:31.520] Decode batch, #running-req: 182, #full token: 99811, full token usage: "
               "0.03, mamba num: 364, mamba usage: 0.67, cuda graph: True, gen throughput (token/s): 1401.20, "
               "#queue-req: 182")


def multi_turn_log(tmp_path: Path, strategy: str = "no_buffer", radix: str = "False",
                   cached: int | None = None) -> Path:
    """The real log's last lines (one Decode, two Prefill lines of an each_turn run whose prefix cache took 5 tokens
    of 473 and of 196) after a server_args line naming its strategy, the two Prefill lines five times over (the
    batches of the 0.72 s to the next Decode line: about 1,000 tokens generated against 3,295 prefilled); `cached`
    puts another count in them."""
    decode_line, *prefill = [line for line in MULTI_TURN.read_text().splitlines() if line.startswith("[")]
    if cached is not None:
        prefill = [line.replace("#cached-token: 5,", f"#cached-token: {cached},") for line in prefill]
    batches = [f"[2026-12-06 04:49:{30.9 + 0.06 * i:06.3f}]" + line[line.index("]") + 1:]
               for i, line in enumerate(prefill * 5)]
    path = tmp_path / "multi-turn.log"
    path.write_text("\n".join([SERVER_ARGS.format(radix=radix, strategy=strategy), decode_line, *batches,
                               NEXT_DECODE]) + "\n")
    return path


def test_the_real_prefill_lines_give_the_cache_its_share(tmp_path):
    run = read_log(multi_turn_log(tmp_path))
    prefill = [r for r in run.rows if r["kind"] == "prefill"]
    assert [(r["new_token"], r["cached_token"]) for r in prefill] == [(468, 5), (191, 5)] * 5
    assert run.strategy == "no_buffer" and run.retractions == [] and run.retracted == Retractions()


def test_a_prefill_heavy_run_names_a_cache_that_serves_little_instead_of_keeping_it(tmp_path):
    (finding,) = diagnose(read_log(multi_turn_log(tmp_path)))
    assert finding.code == "prefill_heavy"
    assert "the prefix cache is on (no_buffer) but gave only 50 of the 3345 prompt tokens (1.5%)" in finding.message
    assert not any("keep the prefix cache on" in a for a in finding.advice)
    assert any("each_turn conversations" in a and "engine.max_running_requests" in a and "engine.memory_share" in a
               for a in finding.advice)
    # the setting that turns it off is SGLang's own: its words come from the backend's module
    assert any("engine.sglang.mamba_strategy: no_radix (one mamba-state slot a request against the 3 it holds now"
               in a for a in finding.advice)


def test_a_cache_that_serves_or_is_off_keeps_the_old_advice(tmp_path):
    serving = diagnose(read_log(multi_turn_log(tmp_path, cached=300)))  # 3,000 of 6,295 prompt tokens: 48%
    off = diagnose(read_log(multi_turn_log(tmp_path, strategy="auto", radix="True")))
    for (finding,) in (serving, off):
        assert finding.code == "prefill_heavy" and "prefix cache is on" not in finding.message
        assert finding.advice[-1] == "with shared prefixes, keep the prefix cache on (not " \
                                     "engine.sglang.mamba_strategy: no_radix)"


def by_turn(shared_served: list[tuple[int, int]]) -> list[dict]:
    """A done file's prefix_cache_by_turn: turn 1 of 100 conversations, then (shared, cached) per later turn."""
    turns = [{"turn": 1, "requests": 100, "prompt_tokens": 20_000, "cached_tokens": 500, "cached_share": 0.025,
              "shared_tokens": None, "cached_of_shared": None}]
    for turn, (shared, cached) in enumerate(shared_served, 2):
        prompt = shared + 5_000
        turns.append({"turn": turn, "requests": 100, "prompt_tokens": prompt, "cached_tokens": cached,
                      "cached_share": round(cached / prompt, 4), "shared_tokens": shared,
                      "cached_of_shared": round(cached / shared, 4)})
    return turns


def shard_run(turns: list[dict], strategy: str | None = "no_buffer") -> Run:
    prefix_cache = None if strategy is None else strategy != "no_radix"  # as the SGLang backend reads it
    return Run([], {}, {}, RunSettings(mamba_strategy=strategy, prefix_cache=prefix_cache, mamba_slots_per_request=3),
               [], prefix_cache_by_turn=turns)


def test_a_shard_whose_cache_missed_the_histories_is_named():
    (finding,) = diagnose(shard_run(by_turn([(30_000, 3_000), (40_000, 20_000)])))
    assert finding.code == "prefix_cache_low"
    assert finding.message.startswith("the prefix cache is on (no_buffer) but gave only 23000 of the 70000 tokens "
                                      "later turns share with their conversation's previous turn (33%; turn 2 10%, "
                                      "turn 3 50%), 23500 of all 100000 prompt tokens (23.5%)")
    assert "engine.max_running_requests" in finding.advice[0] and "engine.inflight" in finding.advice[0]
    assert finding.evidence[0].startswith("prefix_cache_by_turn: {'turn': 2, 'requests': 100")


def test_a_cache_that_kept_the_histories_is_off_or_had_none_to_keep_is_not():
    assert diagnose(shard_run(by_turn([(30_000, 24_000), (40_000, 40_500)]))) == []  # 80% and more
    assert diagnose(shard_run(by_turn([(30_000, 0)]), strategy="no_radix")) == []  # off: nothing to serve from
    assert diagnose(shard_run(by_turn([]))) == []  # single turns: nothing shared with a previous turn
    no_cache = [{**t, "cached_tokens": 0} for t in by_turn([(30_000, 0)])]
    assert diagnose(shard_run(no_cache, strategy=None)) == []  # the CPU engine: no cache named, none used
    assert [f.code for f in diagnose(shard_run(by_turn([(30_000, 0)]), strategy=None))] == ["prefix_cache_low"]


CURRENT = ("[2026-12-06 04:45:10.512] KV cache pool is full. Retract requests. #retracted_reqs: 7, "
           "#new_tokens_gained: 6134, #mamba_num_gained: 21, #new_token_ratio: 0.4200 -> 0.5731")
SGLANG_04 = ("[2026-12-06 04:45:12.000] Decode out of memory happened. #retracted_reqs: 1, "
             "#new_token_ratio: 0.5731 -> 0.6000")


def decode(second: int, running: int, usage: float, queue: int) -> str:
    return (f"[2026-12-06 04:45:{second:02d}.000] Decode batch, #running-req: {running}, #full token: 900000, full "
            f"token usage: {usage:.2f}, mamba num: {running}, mamba usage: 0.50, cuda graph: True, gen throughput "
            f"(token/s): 8000.00, #queue-req: {queue}")


def test_retraction_lines_are_counted_and_named_with_their_cost_and_the_cap(tmp_path):
    log = tmp_path / "retract.log"
    log.write_text("\n".join([SERVER_ARGS.format(radix="True", strategy="auto"), decode(9, 520, 0.99, 300), CURRENT,
                              decode(11, 513, 1.00, 307), SGLANG_04, decode(13, 241, 0.98, 579),
                              decode(15, 200, 0.40, 0)]) + "\n")
    run = read_log(log)
    assert run.retracted == Retractions(events=2, requests=8, tokens=6134, uncounted=1)
    assert run.retractions == [CURRENT, SGLANG_04]
    (finding,) = [f for f in diagnose(run) if f.code == "retractions"]
    assert finding.message == (
        "the KV pool filled and the engine retracted running requests 2 times (8 requests, 6134 tokens of KV given "
        "back (as 1 of the 2 lines say): their prompts and what they had generated, prefilled again when "
        "readmitted); with the pool full and requests waiting, running fell to 241")
    assert finding.advice[0] == "lower engine.max_running_requests to about 241, what the full KV pool held"
    assert finding.evidence == [CURRENT, SGLANG_04]
