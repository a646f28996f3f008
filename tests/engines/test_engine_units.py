"""Direct tests of the engine helpers otherwise reached only end to end: the watchdog (progress, out-of-memory
lines, a stall kills the engine), the fd 2 tap, and the model shape (weights, state and KV sizes, dtypes)."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from shardgen.engines import LogLine, RunSettings
from shardgen.engines.logtap import LogTap
from shardgen.engines.model_shape import ModelConfigError, ModelShape
from shardgen.engines.sglang.engine import SGLangEngine
from shardgen.engines.watchdog import Watchdog

from helpers import TESTS

class Reports(list):
    """The watchdog's reports (generate writes them to the attempt record), in order."""

    def __call__(self, event: str, detail: str) -> None:
        self.append((event, detail))


def read(line: str) -> LogLine:
    return SGLangEngine.read_log_line(line)  # the backend's reading, as the engine's log tap gives it


DECODING = ("[2026-12-02 10:26:24] Decode batch, #running-req: 191, #full token: 36384, full token usage: 0.05, "
            "mamba num: 691, mamba usage: 0.72, cuda graph: True, gen throughput (token/s): 1283.38, #queue-req: 809")


def test_a_decode_line_with_throughput_is_progress_an_idle_one_is_not():
    dog = Watchdog(60, Reports())
    dog.last_progress = 0.0
    dog.saw("idle", read(DECODING.replace("1283.38", "0.00")))
    dog.saw("prefill", read("[2026-12-02 10:00:00] Prefill batch, #new-seq: 1, #new-token: 5, #cached-token: 0, "
                            "full token usage: 0.01, #running-req: 0, #queue-req: 0"))
    assert dog.last_progress == 0.0
    dog.saw("decoding", read(DECODING))
    assert dog.last_progress > 0.0


def test_the_first_out_of_memory_line_is_reported_once():
    reports = Reports()
    dog = Watchdog(60, reports)
    dog.saw("an ordinary line", read("an ordinary line"))
    assert reports == []
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    dog.saw(oom, read(oom))
    dog.saw("CUDA out of memory again", read("torch.OutOfMemoryError: CUDA out of memory again"))
    assert reports == [("out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")]


def test_a_stall_kills_the_engine_and_is_reported():
    killed, reports = threading.Event(), Reports()
    dog = Watchdog(0.5, reports)
    dog.start(killed.set)
    try:
        assert killed.wait(5.0), "the watchdog never killed a stalled engine"
    finally:
        dog.close()
    (event, detail), = reports
    assert event == "stalled" and detail.startswith("no progress for ")


def test_progress_keeps_the_engine_alive():
    killed, reports = threading.Event(), Reports()
    dog = Watchdog(1.5, reports)
    dog.start(killed.set)
    try:
        for _ in range(12):  # 3 s of progress every 0.25 s: twice the stall limit
            dog.saw("Decode batch", read(DECODING))
            time.sleep(0.25)
        assert not killed.is_set()
    finally:
        dog.close()
    assert reports == []


def test_the_tap_sees_every_line_written_to_fd_2():
    lines = []
    tap = LogTap(lines.append)
    try:
        os.write(2, b"Decode batch, #running-req: 3\npartial ")
        os.write(2, "line \xe9 done\nunterminated".encode())
    finally:
        tap.close()
    deadline = time.monotonic() + 5
    while len(lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lines == ["Decode batch, #running-req: 3", "partial line \xe9 done"]


KILLED_AFTER_SAYING_WHY = """
import os, signal, sys
from shardgen.engines.logtap import LogTap
os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)  # the job's log
tap = LogTap(lambda line: None)
for n in range(200):  # a scheduler's lines, then the reason, written into the pipe just before the kill
    os.write(2, f"Decode batch {n}\\n".encode())
os.write(2, b"no engine progress for 31 s: killing the engine\\n")
tap.settle()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_process_that_kills_itself_after_logging_why_keeps_the_line_in_its_log(tmp_path):
    """The engine's kill settles its fd 2 tap first: a SIGKILL ends the pump thread too, and the watchdog's reason,
    logged into the pipe a moment before, was lost from the job's log (seen once in the suite)."""
    for attempt in range(5):
        log = tmp_path / f"job-{attempt}.log"
        ran = subprocess.run([sys.executable, "-c", KILLED_AFTER_SAYING_WHY, str(log)], timeout=60)
        assert ran.returncode == -signal.SIGKILL
        lines = log.read_text().splitlines()
        assert lines[-1] == "no engine progress for 31 s: killing the engine" and len(lines) == 201, lines[-3:]


PLAIN = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3,
         "intermediate_size": 256, "vocab_size": 1000, "torch_dtype": "float16"}


def test_a_plain_decoders_shape_by_hand():
    shape = ModelShape(PLAIN)
    assert shape.pattern == "***" and not shape.is_hybrid
    # per layer: q and o (64x64 each), k and v (64x32 each), gated MLP 3 x 64x256; plus the LM head 64x1000
    per_layer = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 256
    assert shape.weights() == (3 * per_layer + 64_000,) * 2
    assert shape.resident_weights() == 3 * per_layer + 2 * 64_000  # the embedding table too (not tied)
    assert ModelShape({**PLAIN, "tie_word_embeddings": True}).resident_weights() == 3 * per_layer + 64_000
    assert shape.kv_bytes_per_token(2) == 3 * 2 * 2 * 16 * 2  # layers x (K, V) x kv heads x head_dim x bytes
    assert shape.state_bytes_per_request(4) == 0
    assert shape.dtypes(RunSettings()) == {"weights": "float16", "kv": "float16", "ssm_state": "float32"}
    assert shape.dtypes(RunSettings(kv_cache_dtype="fp8_e4m3", ssm_state_dtype="bfloat16")) == {
        "weights": "float16", "kv": "fp8_e4m3", "ssm_state": "bfloat16"}


def test_the_nemotron_h_shape_from_its_config():
    shape = ModelShape.from_dir(TESTS / "data" / "models" / "nh8b")
    cfg = shape.cfg
    assert shape.is_hybrid and shape.pattern == cfg["hybrid_override_pattern"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    assert shape.kv_bytes_per_token(2) == shape.pattern.count("*") * 2 * cfg["num_key_value_heads"] * head_dim * 2
    state_elems, conv_dim, kernel = shape._mamba()
    assert state_elems == cfg["mamba_num_heads"] * cfg["mamba_head_dim"] * cfg["ssm_state_size"]
    assert shape.state_bytes_per_request(4) == shape.pattern.count("M") * (state_elems * 4
                                                                            + conv_dim * (kernel - 1) * 2)
    assert shape.state_bytes_per_request(2) < shape.state_bytes_per_request(4)
    active, total = shape.weights()
    assert active == total == sum(shape.layer_weights(k)[0] for k in shape.pattern) + cfg["hidden_size"] * cfg[
        "vocab_size"]
    assert 7e9 < total < 9e9  # an 8B model


def test_an_unknown_layer_kind_or_a_missing_config_is_a_clear_error(tmp_path):
    with pytest.raises(ModelConfigError, match="layer kind 'Q'"):
        ModelShape({**PLAIN, "hybrid_override_pattern": "*Q"}).weights()
    with pytest.raises(ModelConfigError, match="no config.json"):
        ModelShape.from_dir(tmp_path)
