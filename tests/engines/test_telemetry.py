"""The scheduler log parser against real SGLang 0.5.13.post1 logs from an H200 (tests/data/sglang-logs)."""

from datetime import datetime, timezone

import pytest

from shardgen.engines.sglang.log_lines import parse_line, parse_startup

from helpers import LOGS



def parse(name):
    lines = (LOGS / name).read_text().splitlines()
    rows, facts = [], {}
    for line in lines:
        if row := parse_line(line):
            rows.append(row)
        else:
            parse_startup(line, facts)
    return lines, rows, facts


@pytest.mark.parametrize("name", ["nh8b-no_buffer-default.log", "nh8b-extra_buffer-ratio8.log",
                                  "tiny-no_buffer-fa3.log"])
def test_every_batch_line_is_parsed(name):
    lines, rows, _ = parse(name)
    assert sum("Decode batch" in line for line in lines) == sum(r["kind"] == "decode" for r in rows)
    assert sum("Prefill batch" in line for line in lines) == sum(r["kind"] == "prefill" for r in rows)


def test_decode_and_prefill_fields_of_a_hybrid_line():
    _, rows, facts = parse("nh8b-no_buffer-default.log")
    decode = next(r for r in rows if r["kind"] == "decode")
    assert decode == {"ts": datetime(2026, 12, 2, 10, 21, 47, tzinfo=timezone.utc), "kind": "decode", "running": 170,
                      "queue": 830, "full_token_usage": 0.01, "mamba_num": 340, "mamba_usage": 0.66,
                      "cuda_graph": True, "gen_throughput": 981.38, "new_seq": None, "new_token": None,
                      "cached_token": None, "input_throughput": None, "full_tokens": 32054}
    prefill = next(r for r in rows if r["kind"] == "prefill" and r["new_seq"] == 7)
    assert (prefill["new_token"], prefill["cached_token"], prefill["mamba_usage"], prefill["input_throughput"]) == (
        1189, 0, 0.03, 15248.99)
    assert facts == {"max_mamba_cache_size": 513, "mamba_pool_gb": 48.9, "kv_pool_tokens": 3561008,
                     "kv_pool_gb": 54.34, "max_total_num_tokens": 3561008, "max_running_requests": 171}


def test_eager_decode_batches_above_the_graph_limit_are_seen():
    _, rows, facts = parse("tiny-no_buffer-fa3.log")
    assert facts["max_running_requests"] == 4096
    assert any(r["kind"] == "decode" and not r["cuda_graph"] and r["running"] > 256 for r in rows)


def test_millisecond_timestamps_plain_models_and_tp_prefixes():
    row = parse_line("[2026-12-02 10:21:47.125 TP0] Decode batch, #running-req: 3, #token: 900, token usage: 0.02, "
                     "cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0")
    assert row["ts"].microsecond == 125000 and row["full_token_usage"] == 0.02 and row["mamba_usage"] is None
    assert parse_line("[2026-12-02 10:21:47] Load weight end.") is None
