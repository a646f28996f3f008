"""Direct tests of the diagnosis pieces otherwise reached through `shardgen diagnose`: peaks (lookup), efficiency
(context tokens, decode lines, the roofline on a real H200 log), diagnose_run (what a log gives), diagnose_rules
(each rule on a hand-made run) and diagnose_render (the text)."""

from datetime import datetime, timedelta

import pytest

from shardgen.engines import RunSettings
from shardgen.report import efficiency
from shardgen.report.diagnose_render import render
from shardgen.report.diagnose_rules import Finding, diagnose
from shardgen.report.diagnose_run import Run, read_log
from shardgen.report.peaks import PEAKS, UnknownGPU, lookup
from shardgen.report.roofline import Model

from helpers import LOGS, TESTS

NH8B = TESTS / "data" / "models" / "nh8b"
T0 = datetime(2026, 1, 1)


def test_peaks_by_exact_or_folded_name_and_config_overrides():
    assert lookup("NVIDIA H200") == PEAKS["NVIDIA H200"] and lookup("NVIDIA H200").tbps == 4.8
    assert lookup("  nvidia h100 80gb hbm3 ") is PEAKS["NVIDIA H100 80GB HBM3"]
    own = lookup("My GPU", {"My GPU": {"tflops": "100", "tbps": 1}})
    assert (own.tflops, own.tbps, own.source) == (100.0, 1.0, "config hardware.peaks")
    assert lookup("NVIDIA H200", {"NVIDIA H200": {"tflops": 1, "tbps": 2}}).tflops == 1.0  # an override replaces
    with pytest.raises(UnknownGPU, match="no peak figures for GPU 'Nope'.*hardware.peaks"):
        lookup("Nope")
    with pytest.raises(UnknownGPU, match="--gpu NAME"):
        lookup(None)


def row(kind="decode", running=10, queue=0, gen=100.0, usage=0.1, s=0, **more) -> dict:
    return {"ts": T0 + timedelta(seconds=s), "kind": kind, "running": running, "queue": queue,
            "full_token_usage": usage, "gen_throughput": gen, "cuda_graph": True, "new_token": 0, **more}


def test_context_tokens_and_the_steady_decode_lines():
    assert efficiency.context_tokens({"full_tokens": 500, "full_token_usage": 0.5}, {}) == 500.0
    assert efficiency.context_tokens({"full_token_usage": 0.25}, {"max_total_num_tokens": 1000}) == 250.0
    assert efficiency.context_tokens({"full_token_usage": 0.25}, {}) is None
    rows = [row(queue=5, s=1), row(queue=0, s=2), row(kind="prefill", s=3), row(running=0, s=4), row(gen=0.0, s=5)]
    assert efficiency.decode_lines(rows) == [rows[0]]  # while requests waited
    assert efficiency.decode_lines(rows[1:]) == [rows[1]]  # else every decode line with work and throughput


def test_efficiency_on_a_real_h200_log_by_its_own_arithmetic():
    run = read_log(LOGS / "nh8b-no_buffer-default.log")
    model = Model.from_dir(NH8B)
    eff = efficiency.efficiency(run.rows, run.facts, run.settings, model, "NVIDIA H200")
    lines = efficiency.decode_lines(run.rows)
    assert eff["decode_lines"] == len(lines) == 32 and eff["running"] == 170
    assert eff["dtypes"] == {"weights": "bfloat16", "kv": "bfloat16", "ssm_state": "float32"}
    # the median line's step: its bytes at its rate are the achieved bandwidth's order
    assert eff["bound"] == "memory" and eff["flops_per_byte"] < eff["ridge_flops_per_byte"]
    assert eff["of_peak_tbps"] == round(eff["achieved_tbps"] / 4.8, 3) and 0 < eff["of_peak_tbps"] < 1
    assert eff["dominant_bytes"] == max(eff["bytes_per_step"], key=eff["bytes_per_step"].get) == "state"
    assert eff["bytes_per_step"]["weights"] == model.weights()[1] * 2 and eff["warning"] is None
    assert efficiency.near_compute_peak(eff) is False
    assert efficiency.describe(run.rows, run.facts, run.settings, None, "NVIDIA H200") == (
        None, "no efficiency: the model is not known (pass --model MODEL_DIR)")
    assert efficiency.describe(run.rows, run.facts, run.settings, NH8B, "Nope")[1].startswith(
        "no efficiency: no peak figures")
    assert efficiency.describe([], {}, RunSettings(), NH8B, "NVIDIA H200") == (
        None, "no efficiency: no decode lines to measure")


def test_a_log_gives_its_rows_pool_sizes_settings_and_evidence_lines():
    run = read_log(LOGS / "nh8b-no_buffer-default.log")
    assert len(run.rows) == 65 and [r["kind"] for r in run.rows].count("decode") == 38
    assert run.facts["max_running_requests"] == 171 and run.facts["max_mamba_cache_size"] == 513
    assert (run.strategy, run.settings.mamba_slots_per_request, run.graph_limit) == ("no_buffer", 3, 256)
    assert sorted(run.lines) == list(range(65))  # every row keeps the line it came from
    assert all(("Decode batch" if r["kind"] == "decode" else "Prefill batch") in run.lines[i]
               for i, r in enumerate(run.rows))
    assert run.retractions == []


def test_a_log_with_retractions_keeps_them(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("noise\n[2026-01-01 00:00:00] KV cache pool is full. Retract requests. #retracted_reqs: 3\n")
    run = read_log(log)
    assert run.rows == [] and run.retractions == ["[2026-01-01 00:00:00] KV cache pool is full. Retract requests. "
                                                   "#retracted_reqs: 3"]


def hand_run(rows, facts=None, settings=None, retractions=()) -> Run:
    return Run(rows, {i: f"line {i}" for i in range(len(rows))}, facts or {}, settings or RunSettings(),
               list(retractions))


def codes(run, eff=None) -> list[str]:
    return [f.code for f in diagnose(run, eff)]


def test_each_rule_on_a_hand_made_run():
    cap = {"max_running_requests": 100}
    # the queue empty while running sat below the cap, before the queue drained for good: the client is slow
    feeder = hand_run([row(running=40, queue=0, gen=400.0, s=1), row(running=40, queue=0, gen=400.0, s=2),
                       row(running=99, queue=3, gen=990.0, s=3)], cap)
    (finding,) = diagnose(feeder)
    assert finding.code == "feeder_bound" and "2 of 3 decode batches" in finding.message
    assert finding.evidence == ["line 0", "line 1"]
    # at the cap with KV nearly full
    full = hand_run([row(running=100, queue=5, usage=0.9, s=i) for i in range(4)], cap)
    assert codes(full) == ["kv_bound"]
    # at the cap, work waiting, memory to spare: the user's cap
    capped = hand_run([row(running=100, queue=5, usage=0.2, s=i) for i in range(4)], cap)
    assert codes(capped) == ["running_cap_bound"]
    # batches above the CUDA-graph limit without graphs
    eager = hand_run([row(running=300, gen=3000.0, cuda_graph=False), row(running=10)],
                     settings=RunSettings(graph_limit=256))
    (finding,) = diagnose(eager)
    assert finding.code == "cuda_graph_uncovered" and "up to 300" in finding.message and finding.evidence == ["line 0"]
    # throughput flat while running doubled
    flat = hand_run([row(running=50, gen=1000.0, s=1), row(running=100, gen=1010.0, s=2)])
    assert codes(flat) == ["compute_saturated"]
    assert codes(hand_run([row(running=50, gen=1000.0), row(running=100, gen=2000.0)])) == []  # it scaled
    # retractions
    assert codes(hand_run([], retractions=["retract 1"])) == ["retractions"]
    # prefill far above what decode generated, while requests waited
    heavy = hand_run([row(running=10, queue=5, gen=10.0, s=0), row(kind="prefill", new_token=5000, queue=5, s=1),
                      row(running=10, queue=5, gen=10.0, s=2)], cap)
    assert "prefill_heavy" in codes(heavy)
    assert codes(hand_run([row(running=10, queue=0)])) == []  # nothing to say


def test_the_text_names_each_finding_its_changes_and_evidence():
    eff = {"achieved_tflops": 100.0, "of_peak_tflops": 0.101, "peak_tflops": 989.5, "achieved_tbps": 2.2,
           "of_peak_tbps": 0.458, "peak_tbps": 4.8, "gpu": "NVIDIA H200", "bound": "memory", "flops_per_byte": 45.5,
           "ridge_flops_per_byte": 206.1, "dominant_bytes": "state", "bytes_per_step": {"weights": 15e9, "state": 2e10},
           "warning": None}
    finding = Finding("kv_bound", "KV is full", ["raise mem_fraction_static"], ["x" * 300])
    text = render({"a.log": {"findings": [finding.__dict__], "efficiency": eff, "efficiency_note": None},
                   "b.log": {"findings": [], "efficiency": None, "efficiency_note": "no efficiency: why"}})
    assert text.splitlines() == [
        "a.log: kv_bound",
        "  efficiency: 100.0 TFLOP/s (10.1% of 989.5), 2.2 TB/s (45.8% of 4.8) on NVIDIA H200; memory-bound "
        "(45.5 FLOP/byte, ridge 206.1); state moves the most bytes per step (weights 15.00 GB, state 20.00 GB)",
        "  [kv_bound] KV is full",
        "    change: raise mem_fraction_static",
        "    evidence: " + "x" * 220,
        "b.log: no bottleneck found",
        "  no efficiency: why"]
    assert render({"c": {"findings": [], "efficiency": {**eff, "warning": "above peak"}, "efficiency_note": None}}
                  ).endswith("; WARNING: above peak")


HIDDEN_PASS = {"turns": 800, "positions": 248_905, "pass_s": 1210.5, "read_s": 30.2, "encode_s": 12.1,
               "logprobs_in_pass": False, "hook": {"chunks": 950, "positions": 248_905, "bytes": 10_195_269_288,
                                                   "scheduler_s": 4.2, "write_s": 41.0, "errors": 0}}


def test_a_capture_pass_is_its_own_phase_not_a_starved_feeder_nor_prompt_prefill():
    # decode below the cap with an empty queue, and a prefill of about the captured positions
    starved = [row(running=300, queue=0, s=0), row(running=300, queue=0, s=1),
               row(kind="prefill", new_token=249_000, queue=40, s=2), row(running=300, queue=40, s=3)]
    assert codes(hand_run(starved, {"max_running_requests": 512})) == ["feeder_bound", "prefill_heavy"]
    run = hand_run(starved, {"max_running_requests": 512})
    run.hidden_pass = HIDDEN_PASS
    (finding,) = diagnose(run)
    assert finding.code == "capture_pass"
    assert finding.message.startswith("800 turns were captured: a second prefill of their 248905 positions")
    assert "held the scheduler 4.2 s" in finding.message and "wrote 10.2 GB in 41 s" in finding.message
    assert any("hidden_states: false" in a for a in finding.advice)


def test_a_log_alone_whose_prefills_took_cached_tokens_had_a_prefix_cache_on():
    """Without the start-up settings (no strategy said), cached tokens prove a prefix cache served the run."""
    heavy = [row(running=10, queue=5, gen=10.0, s=0),
             row(kind="prefill", new_token=5000, cached_token=128, queue=5, s=1),
             row(running=10, queue=5, gen=10.0, s=2)]
    (finding,) = diagnose(hand_run(heavy, {"max_running_requests": 64}))
    assert finding.code == "prefill_heavy"
    assert "the prefix cache is on (the log shows cached tokens) but gave only 128 of the 5128" in finding.message
    assert not any("keep the prefix cache on" in a for a in finding.advice)
