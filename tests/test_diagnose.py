"""Bottleneck diagnosis on the real H200 logs (ground truth in tests/data/sglang-logs/README.md) and on synthetic
lines for the cases those logs do not show."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from shardgen.cli import main
from shardgen.diagnose import diagnose, read_log

LOGS = Path(__file__).parent / "data" / "sglang-logs"
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
    ("tune-nh8b-no_radix-1024-fp32.log", ["kv_bound"]),
    ("tune-nh8b-no_radix-1024-bf16.log", []),  # at a cap the user chose, the pool sized to it, KV at 0.18
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
    assert all("Decode batch" in e and "#running-req: 170" in e for e in finding.evidence)


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
    result = json.loads(capsys.readouterr().out)
    finding = result[str(LOGS / "tiny-no_buffer-fa3.log")][0]
    assert finding["code"] == "cuda_graph_uncovered" and "raise the CUDA-graph decode limit to 2000" in finding["advice"][0]
