"""The hidden-state pass's hand-off (engines/sglang/hidden.py) against tests/fake_sglang: without a prefix cache the
pass asks no input logprobs, the done record splits the pass's time, the hand-off folder is gone after the engine,
and a turn's files written late by the scheduler's writer thread are still collected (or the turn refused, named)."""

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from shardgen.capture import HiddenCapture
from shardgen.engines.sglang import hidden, hidden_hooks
from shardgen.engines.sglang.hidden import HiddenPass
from shardgen.engines.sglang.hidden_hooks import HOOK_STATS, PASS_PREFIX

from helpers import generate_captured_shard

MODEL = {"num_hidden_layers": 4, "hidden_size": 8, "architectures": ["NemotronHForCausalLM"]}


def test_without_a_prefix_cache_the_pass_asks_no_logprobs_and_the_done_record_splits_its_time(
        make_config, write_jsonl, monkeypatch):
    _, layout = generate_captured_shard(make_config, write_jsonl, monkeypatch, "no_radix", FAKE_SGLANG_CHUNK="4")

    done = json.loads(layout.done(0).read_text())
    record = done["engine"]["hidden_pass"]
    assert record["turns"] == 5 and record["logprobs_in_pass"] is False
    assert record["positions"] == record["hook"]["positions"] > 0  # every position handed off, none twice
    assert record["hook"]["chunks"] > record["turns"]  # chunked prefill: a file per chunk
    assert record["hook"]["errors"] == 0 and record["hook"]["bytes"] > 0
    assert record["pass_s"] > 0 and record["read_s"] > 0 and record["wait_s"] >= 0 and record["hook"]["write_s"] > 0
    assert not Path(record["folder"]).exists()  # the engine's close removes the hand-off folder


def _pass(tmp_path: Path, monkeypatch, wait_s: float) -> HiddenPass:
    monkeypatch.setattr(hidden, "SHARED_MEMORY", tmp_path / "no-shm")  # the workdir's folder
    monkeypatch.setattr(HiddenPass, "HANDOFF_WAIT_S", wait_s)
    return HiddenPass(HiddenCapture([1, 2], "bfloat16"), MODEL, tmp_path, {"disable_radix_cache": True})


def test_files_the_writer_saves_after_the_pass_returned_are_waited_for(tmp_path, monkeypatch):
    capture = _pass(tmp_path, monkeypatch, 10.0)
    rid, rows = PASS_PREFIX + "r1", torch.arange(6 * 2 * 8, dtype=torch.float32).reshape(6, 2, 8)

    def write_late():
        save_file({"states": rows[:4].contiguous()}, str(capture.folder / f"{rid}.0-4.safetensors"))
        time.sleep(0.3)
        save_file({"states": rows[4:].contiguous()}, str(capture.folder / f"{rid}.4-6.safetensors"))

    writer = threading.Thread(target=write_late)
    writer.start()
    chunks = asyncio.run(capture._written(rid, 6))  # on the event loop, while the writer saves the rest
    writer.join()
    states = capture.collect(rid, chunks, 6)
    assert torch.equal(states, rows)
    assert not list(capture.folder.glob(f"{rid}.*"))  # read and removed


def test_a_turn_whose_positions_never_come_is_refused_naming_it(tmp_path, monkeypatch):
    capture = _pass(tmp_path, monkeypatch, 0.2)
    rid = PASS_PREFIX + "r2"
    save_file({"states": torch.zeros(3, 2, 8)}, str(capture.folder / f"{rid}.0-3.safetensors"))
    chunks = asyncio.run(capture._written(rid, 5))  # what there is after HANDOFF_WAIT_S
    with pytest.raises(RuntimeError, match=f"{rid}: .* gave 2 of the turn's 5 positions no hidden states"):
        capture.collect(rid, chunks, 5)


def test_the_hand_off_uses_shared_memory_only_where_it_has_room(tmp_path, monkeypatch):
    roomy = tmp_path / "shm"
    roomy.mkdir()
    monkeypatch.setattr(hidden, "SHARED_MEMORY", roomy)
    monkeypatch.setattr(hidden, "SHARED_MEMORY_MIN_FREE", 1)
    assert hidden.handoff_folder(tmp_path / "w").parent == roomy
    monkeypatch.setattr(hidden, "SHARED_MEMORY_MIN_FREE", 1 << 62)
    assert hidden.handoff_folder(tmp_path / "w") == tmp_path / "w" / hidden.PASS_FOLDER


def test_the_writer_counts_what_it_handed_off(tmp_path):
    handoff = hidden_hooks.Handoff(tmp_path)
    handoff.send(f"{PASS_PREFIX}r3.0-5", torch.ones(5, 2, 8, dtype=torch.bfloat16))
    handoff.writer.shutdown(wait=True)
    stats = json.loads((tmp_path / HOOK_STATS).read_text())
    assert (stats["chunks"], stats["positions"], stats["bytes"], stats["errors"]) == (1, 5, 5 * 2 * 8 * 2, 0)
    assert (tmp_path / f"{PASS_PREFIX}r3.0-5.safetensors").exists()
