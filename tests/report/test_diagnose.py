"""Bottleneck diagnosis on the real H200 logs (ground truth in tests/data/sglang-logs/README.md) and on synthetic
lines for the cases those logs do not show."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shardgen.cli import main
from shardgen.report.diagnose import diagnose, read_log

from helpers import LOGS

T0 = datetime(2026, 12, 2, 10, 0, 0)
ARGS = "server_args=ServerArgs(model_path='/m', disable_radix_cache={radix}, cuda_graph_max_bs={graphs}, " \
       "mamba_scheduler_strategy='{strategy}', disable_overlap_schedule=True)"


def codes(path) -> list[str]:
    return [f.code for f in diagnose(read_log(path))]


@pytest.mark.parametrize("name, expected", [
    ("nh8b-no_buffer-default.log", ["mamba_pool_bound"]),
    ("nh8b-extra_buffer-ratio8.log", ["mamba_pool_bound"]),
    ("tiny-no_buffer-fa3.log", ["cuda_graph_uncovered"]),
    ("tune-nh8b-extra_buffer-ratio8.log", ["mamba_pool_bound"]),
    ("tune-nh8b-no_radix-1024-fp32.log", ["kv_bound", "compute_saturated"]),  # 954 -> 1024 in the tail: flat
    # the user's cap with 477 waiting and KV at 0.18, but 9,911 tok/s at 477 running in the tail vs 10,208 at 1023
    ("tune-nh8b-no_radix-1024-bf16.log", ["running_cap_bound", "compute_saturated"]),
])
def test_real_logs(name, expected):
    assert codes(LOGS / name) == expected


def test_kv_bound_below_the_cap_names_the_fp32_mamba_pool():
    finding = diagnose(read_log(LOGS / "tune-nh8b-no_radix-1024-fp32.log"))[0]
    assert "running held at 954, below the cap of 1024" in finding.message and "0.95" in finding.message
    assert any("97.5 GB" in a and "bfloat16" in a for a in finding.advice)


def test_mamba_finding_names_the_pool_and_the_fix():
    finding = diagnose(read_log(LOGS / "nh8b-no_buffer-default.log"))[0]
    assert "513 slots / 3 per request with no_buffer" in finding.message and "KV usage was only 0.02" in finding.message
    assert any("mamba_strategy: no_radix" in a for a in finding.advice)
    assert finding.evidence and all("Decode batch" in e and "#running-req: 170" in e for e in finding.evidence)


def synthetic(tmp_path, decode, prefill=(), cap=512, pool=513, strategy="no_buffer", radix="False", graphs=256,
              extra=()):
    lines = [f"[{T0:%Y-%m-%d %H:%M:%S}] " + ARGS.format(radix=radix, graphs=graphs, strategy=strategy),
             f"[{T0:%Y-%m-%d %H:%M:%S}] Mamba Cache is allocated. max_mamba_cache_size: {pool}, conv_state size: "
             "1.00GB, ssm_state size: 40.00GB ",
             f"[{T0:%Y-%m-%d %H:%M:%S}] max_total_num_tokens=900000, chunked_prefill_size=8192, max_prefill_tokens="
             f"16384, max_running_requests={cap}, context_len=8192, available_gpu_mem=18.93 GB", *extra]
    for i, (running, queue, full, gen, graph) in enumerate(decode):
        ts = T0 + timedelta(seconds=i + 1)
        lines.append(f"[{ts:%Y-%m-%d %H:%M:%S}] Decode batch, #running-req: {running}, #full token: 1000, full token "
                     f"usage: {full:.2f}, mamba num: {running}, mamba usage: 0.50, cuda graph: {graph}, gen throughput "
                     f"(token/s): {gen:.2f}, #queue-req: {queue}")
    for i, (new_token, queue) in enumerate(prefill):
        ts = T0 + timedelta(seconds=i + 1, milliseconds=500)
        lines.append(f"[{ts:%Y-%m-%d %H:%M:%S}] Prefill batch, #new-seq: 4, #new-token: {new_token}, #cached-token: 0, "
                     f"full token usage: 0.10, mamba usage: 0.50, #running-req: 100, #queue-req: {queue}, "
                     "#pending-token: 0, cuda graph: False, input throughput (token/s): 20000.00")
    path = tmp_path / "synthetic.log"
    path.write_text("\n".join(lines))
    return path


def test_feeder_bound_only_before_the_queue_drains(tmp_path):
    starved = [(300, 0, 0.1, 5000, True)] * 6 + [(512, 40, 0.1, 8000, True)] * 4
    tail = [(512, 10, 0.1, 8000, True)] * 8 + [(200, 0, 0.05, 3000, True)] * 8  # empty queue in the tail only
    assert "feeder_bound" in codes(synthetic(tmp_path, starved, cap=512, pool=4000))
    assert "feeder_bound" not in codes(synthetic(tmp_path, tail, cap=512, pool=4000))


def test_kv_bound_and_compute_saturated(tmp_path):
    kv = [(511, 50, 0.93, 8000, True)] * 8
    assert codes(synthetic(tmp_path, kv, cap=512, pool=4000)) == ["kv_bound"]
    flat = [(512, 30, 0.2, 9700, True)] * 5 + [(1024, 30, 0.3, 9720, True)] * 5
    found = diagnose(read_log(synthetic(tmp_path, flat, cap=1024, pool=1024, strategy="", radix="True",
                                        graphs=1024)))
    saturated = next(f for f in found if f.code == "compute_saturated")
    assert "512 -> 1024" in saturated.message and "will not help" in saturated.advice[0]


def test_prefill_heavy_and_retractions(tmp_path):
    decode = [(100, 20, 0.2, 500, True)] * 6
    retract = "[2026-12-02 10:00:03] Decode out of memory happened. #retracted_reqs: 12, #new_token_ratio: 0.4 -> 0.7"
    path = synthetic(tmp_path, decode, prefill=[(8000, 20)] * 4, cap=4096, pool=20000, extra=[retract])
    assert codes(path) == ["prefill_heavy", "retractions"]


def test_cli_json(capsys):
    assert main(["diagnose", str(LOGS / "tiny-no_buffer-fa3.log"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)[str(LOGS / "tiny-no_buffer-fa3.log")]
    finding = result["findings"][0]
    assert finding["code"] == "cuda_graph_uncovered"
    assert "raise the CUDA-graph decode limit to 2000" in finding["advice"][0]
    assert result["efficiency"] is None and "--model" in result["efficiency_note"]


def test_running_cap_bound_says_how_much_room_is_left():
    """The issue's case: a well-tuned H200 run (prefix cache off, cap 1024, bf16 state) with work waiting."""
    finding = diagnose(read_log(LOGS / "tune-nh8b-no_radix-1024-bf16.log"))[0]
    # KV pool 57.9 GB for 3,794,828 tokens, peak usage 0.18 -> 47.5 GB free; 664,594 tokens / 1023 running = 650 per
    # request; a mamba slot = 49.46 GB / 1024 = 48.3 MB; 47.5 GB / (48.3 MB + 650 x 15.26 KB) = 815 more requests
    assert "max_running_requests = 1024 with up to 477 requests waiting" in finding.message
    assert "about 815 more requests fit" in finding.message and "48.3 MB of mamba state" in finding.message
    assert "buys little" in finding.advice[0] and "(now 1024)" in finding.advice[1]  # the tail shows it flat
    assert finding.evidence and all("#queue-req: 477" in e for e in finding.evidence)
    saturated = diagnose(read_log(LOGS / "tune-nh8b-no_radix-1024-bf16.log"))[1]
    assert "(9911 -> 10208 tok/s) across running 477 -> 1023" in saturated.message
    assert ["#running-req: 1023" in saturated.evidence[0], "#running-req: 477" in saturated.evidence[1]] == [True] * 2


def test_running_cap_bound_only_with_work_waiting(tmp_path):
    capped = [(512, 40, 0.3, 8000, True)] * 8
    found = diagnose(read_log(synthetic(tmp_path, capped, cap=512, pool=512, strategy="", radix="True", graphs=512)))
    assert [f.code for f in found] == ["running_cap_bound"]
    # no "KV Cache is allocated" line: the room is unknown, and the advice is to make KV room first
    assert "unknown" in found[0].message and "memory_share" in found[0].advice[0]
    kv_line = f"[{T0:%Y-%m-%d %H:%M:%S}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 900000, K size: " \
              "9.00 GB, V size: 9.00 GB"
    found = diagnose(read_log(synthetic(tmp_path, capped, cap=512, pool=512, strategy="", radix="True", graphs=512,
                                        extra=[kv_line])))
    # 18 GB x (1 - 0.3) = 12.6 GB free; a request: 41 GB / 512 = 80.1 MB of mamba slot + 1000 / 512 = 2 tokens x
    # 18 GB / 900,000 = 0.04 MB of KV -> 157 more; advice: 512 + 80% of 157 = 637
    assert "about 157 more requests fit" in found[0].message and "about 637" in found[0].advice[0]
    drained = [(512, 0, 0.3, 8000, True)] * 8  # at the cap with nothing waiting: the cap costs nothing
    assert "running_cap_bound" not in codes(synthetic(tmp_path, drained, cap=512, pool=512, strategy="",
                                                      radix="True", graphs=512))


NH8B = Path(__file__).parent.parent / "data" / "models" / "nh8b"  # make_model.py's nh8b config.json (no weights)


def test_efficiency_on_the_h200_logs(capsys):
    """nh8b, bf16 state, 1023 running at ~10,200 tok/s: 10.0 steps/s x (15.1 GB weights + 104 GB state + 8-10 GB
    KV) ~ 1.3 TB/s of the H200's 4.8 and ~156 of 989.5 TFLOP/s; 120 FLOP/byte is below the 206 ridge: memory."""
    log = LOGS / "tune-nh8b-no_radix-1024-bf16.log"
    assert main(["diagnose", str(log), "--model", str(NH8B), "--gpu", "NVIDIA H200", "--json"]) == 0
    eff = json.loads(capsys.readouterr().out)[str(log)]["efficiency"]
    assert eff["peak_tflops"] == 989.5 and eff["peak_tbps"] == 4.8 and eff["bound"] == "memory"
    assert 150 < eff["achieved_tflops"] < 162 and 1.2 < eff["achieved_tbps"] < 1.4
    assert eff["dominant_bytes"] == "state" and eff["dtypes"]["ssm_state"] == "bfloat16"
    fp32 = diagnose_json(LOGS / "tune-nh8b-no_radix-1024-fp32.log", capsys)["efficiency"]
    assert fp32["dtypes"]["ssm_state"] == "float32"  # SGLang's default when mamba_ssm_dtype is None
    assert fp32["bytes_per_step"]["state"] > 1.8 * eff["bytes_per_step"]["state"]  # twice the bytes, 954 running


def diagnose_json(log, capsys, gpu="NVIDIA H200"):
    assert main(["diagnose", str(log), "--model", str(NH8B), "--gpu", gpu, "--json"]) == 0
    return json.loads(capsys.readouterr().out)[str(log)]


def test_unknown_gpu_gives_a_message_and_no_efficiency(capsys):
    result = diagnose_json(LOGS / "nh8b-no_buffer-default.log", capsys, gpu="NVIDIA GeForce GTX 480")
    assert result["efficiency"] is None and "NVIDIA GeForce GTX 480" in result["efficiency_note"]
    assert "hardware.peaks" in result["efficiency_note"]
    assert [f["code"] for f in result["findings"]] == ["mamba_pool_bound"]
    assert main(["diagnose", str(LOGS / "nh8b-no_buffer-default.log"), "--model", str(NH8B)]) == 0
    assert "pass --gpu NAME" in capsys.readouterr().out  # a bare log does not name its GPU


def test_compute_saturated_near_the_compute_peak(tmp_path, capsys):
    # the hand config below, context 1 token: 75,264 + 2,560 + 128 = 77,952 FLOPs per token x 9e6 tok/s = 0.70
    # TFLOP/s, 88% of a 0.8 TFLOP/s peak; 9,000 steps/s x 5.07 MB = 0.046 TB/s (far below the 1 TB/s peak)
    decode = [(1000, 50, 0.1, 9.0e6, True)] * 6
    log = synthetic(tmp_path, decode, cap=4096, pool=20000)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(HAND))
    peaks = {"TestGPU": {"tflops": 0.8, "tbps": 1.0}}
    from shardgen.report.diagnose import report
    result = report([log], model, "TestGPU", peaks)[str(log)]
    assert result["efficiency"]["of_peak_tflops"] == 0.877 and result["efficiency"]["bound"] == "compute"
    assert "compute_saturated" in [f["code"] for f in result["findings"]]


# A config small enough to count by hand: hidden 64, layers "M*-", vocab 100.
HAND = {"hidden_size": 64, "hybrid_override_pattern": "M*-", "num_hidden_layers": 3, "vocab_size": 100,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 128,
        "mamba_num_heads": 4, "mamba_head_dim": 8, "ssm_state_size": 16, "n_groups": 1, "conv_kernel": 4,
        "torch_dtype": "bfloat16"}


def test_roofline_arithmetic_by_hand():
    from shardgen.report.roofline import Model

    model = Model(HAND)
    # M: inner = 4 x 8 = 32; conv_dim = 32 + 2 x 1 x 16 = 64; in_proj = 64 x (32 z + 64 xBC + 4 dt) = 6,400;
    #    conv = 64 x 4 = 256; out_proj = 32 x 64 = 2,048                                      -> 8,704
    # *: q 64 x 32 = 2,048, k and v 64 x 16 = 1,024 each, o 32 x 64 = 2,048                    -> 6,144
    # -: up and down 64 x 128 = 8,192 each                                                      -> 16,384
    # LM head 64 x 100 = 6,400; total 8,704 + 6,144 + 16,384 + 6,400                             = 37,632
    assert model.weights() == (37_632, 37_632)
    # per token at context 100: 2 x 37,632 = 75,264; attention 4 x 2 heads x 16 x 100 = 12,800;
    # SSM update 5 x (4 x 8 x 16 = 512 state elements) = 2,560                                  -> 90,624
    assert model.flops_per_token(100) == 90_624
    # state per request, fp32 SSM: 512 x 4 B = 2,048 + conv 64 x (4 - 1) x 2 B = 384           -> 2,432 B
    # KV per token: 1 layer x 2 (K, V) x 1 head x 16 x 2 B                                      -> 64 B
    assert model.state_bytes_per_request(4) == 2_432 and model.kv_bytes_per_token(2) == 64
    step = model.decode_step(batch=10, context=100, weight_bytes=2, kv_bytes=2, ssm_bytes=4)
    # FLOPs 10 x 90,624 = 906,240; weights 37,632 x 2 = 75,264 B; KV 10 x 101 x 64 = 64,640 B;
    # state read + write 2 x 10 x 2,432 = 48,640 B
    assert step == {"flops": 906_240, "bytes": {"weights": 75_264, "kv": 64_640, "state": 48_640}}


def test_a_shard_without_a_done_file_is_read_from_its_telemetry(tmp_path, capsys):
    # a shard still running, or whose attempts all died, has telemetry and no done file: diagnose reads it
    from shardgen.engines.telemetry import TelemetryWriter

    shard = tmp_path / "shard-0000"
    shard.mkdir()
    writer = TelemetryWriter(shard)
    writer.add({"kind": "decode", "ts": 1.0, "running": 4, "queue": 0, "gen_throughput": 100.0})
    writer.close()
    assert main(["diagnose", str(shard), "--json"]) == 0
    assert str(shard) in json.loads(capsys.readouterr().out)
