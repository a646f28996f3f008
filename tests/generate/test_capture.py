"""Capture (config `capture`) with the CPU engine: off changes nothing (the same values in every column the dataset
had, an empty sidecar) but the per-turn signal (`capture.signal`, on by default: the same figures as a captured
run's, nothing per token; `signal: false`: null); on, the sidecar has a row per turns.jsonl row with an entry per
loss-masked position, the chosen token's logprob is the model's own and, greedy, the top-1 entry; a shard killed
and resumed keeps one sidecar row per turn; bad settings fail at config time naming the key."""

import json
import math
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from shardgen.store import db, tables
from shardgen.generate import checkpoint
from shardgen.config import ConfigError
from shardgen.merge.dataset import merge
from shardgen.merge.exports import ExportRules, write_manifest
from shardgen.layout import Layout
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts

from helpers import generate, part_rows, stage

SIGNAL = [name for name, _ in tables.TURN_SIGNAL]
GREEDY = {"temperature": 0.0, "max_new_tokens": 6}


def run(make_config, write_jsonl, capture: dict, n: int = 4, **overrides) -> Layout:
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(n)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                        "sampling": GREEDY}], capture=capture, shards=1, **overrides)
    layout = stage(cfg, 1)
    finish(cfg, layout)
    return cfg, layout


def finish(cfg, layout: Layout) -> None:
    result = merge(layout, layout.dataset, layout.dataset_dir / "train.jsonl", layout.root / "merge" / "failed.parquet",
                   rules=ExportRules(cfg.model.reasoning_tags, cfg.exports.on_length))
    write_manifest(cfg, layout, result)


def sidecar(layout: Layout) -> dict:
    return {r["id"]: r for r in pq.read_table(layout.export("turns.topk.parquet")).to_pylist()}


def turns(layout: Layout) -> dict:
    return {r["id"]: r for r in map(json.loads, layout.export("turns.jsonl").read_text().splitlines())}


@pytest.fixture
def two_runs(make_config, write_jsonl, tmp_path):
    run(make_config, write_jsonl, {})
    shutil.move(tmp_path / "results", tmp_path / "off")
    on = run(make_config, write_jsonl, {"logprobs": True, "top_k": 5})
    return Layout(tmp_path / "off"), on


def test_capture_off_changes_nothing_and_on_changes_no_generated_value(two_runs):
    off, (cfg, on) = two_runs
    old = [c for c in tables.DATASET.names if c not in SIGNAL]
    key = lambda r: (r["conversation_id"], r["turn"])  # noqa: E731
    rows_off = sorted(pq.read_table(off.dataset, columns=old).to_pylist(), key=key)
    rows_on = sorted(pq.read_table(on.dataset, columns=old).to_pylist(), key=key)
    assert rows_off == rows_on and rows_off  # greedy: the capture never touches what is generated
    # the signal (capture.signal, on by default) is the captured run's, from the chosen logprobs alone
    dataset_off = {key(r): r for r in pq.read_table(off.dataset).to_pylist()}
    dataset_on = {key(r): r for r in pq.read_table(on.dataset).to_pylist()}
    for turn, row in dataset_off.items():
        assert row["logprob_mean"] == pytest.approx(dataset_on[turn]["logprob_mean"], abs=1e-6)
        assert row["logprob_min"] == pytest.approx(dataset_on[turn]["logprob_min"], abs=1e-6)
        assert row["logprob_min"] <= row["logprob_mean"] < 0 and row["topk_entropy_mean"] is None
    assert all(r["token_logprobs"] is None and r["top_ids"] is None for r in part_rows(off))
    # off: the sidecar is there (the merge's outputs are one set), with its schema and no rows
    table = pq.read_table(off.export("turns.topk.parquet"))
    assert table.num_rows == 0 and table.schema.equals(tables.TOPK_SIDECAR)
    for name in ("turns.jsonl", "tokens.jsonl", "sharegpt.jsonl"):
        assert sorted(off.export(name).read_text().splitlines()) == sorted(on.export(name).read_text().splitlines())
    manifest = json.loads(off.export("manifest.json").read_text())["capture"]
    assert (manifest["logprobs"], manifest["signal"], manifest["sources"], manifest["rows"]) == (False, True, "none", 0)
    # `shardgen query confidence`: every turn has the signal, only the captured ones the top-k entropy
    counts = lambda layout: [(r["turns"], r["signal_turns"], r["topk_turns"])  # noqa: E731
                             for r in db.query(checkpoint.connect(layout), "confidence")]
    assert counts(off) == [(4, 4, 0)] and counts(on) == [(4, 4, 4)]


def test_without_the_signal_an_uncaptured_turn_has_none(make_config, write_jsonl):
    _, layout = run(make_config, write_jsonl, {"signal": False}, n=2)
    assert all(r[name] is None for r in pq.read_table(layout.dataset).to_pylist() for name in SIGNAL)
    assert all(r["token_logprobs"] is None for r in part_rows(layout))
    assert json.loads(layout.export("manifest.json").read_text())["capture"]["signal"] is False


def test_capture_on_aligns_with_turns_and_greedy_chosen_is_top_1(two_runs, demo_model):
    _, (cfg, layout) = two_runs
    side, rows = sidecar(layout), turns(layout)
    assert set(side) == set(rows) and len(side) == 4
    for tid, row in side.items():
        positions = sum(rows[tid]["loss_mask"])
        assert len(row["logprobs"]) == len(row["top_ids"]) == len(row["top_logprobs"]) == positions > 0
        output = [t for t, m in zip(rows[tid]["input_ids"], rows[tid]["loss_mask"]) if m]
        for i, token in enumerate(output):
            assert len(row["top_ids"][i]) == len(row["top_logprobs"][i]) == 5
            assert row["top_ids"][i][0] == token  # greedy: the chosen token is the most likely
            assert row["logprobs"][i] == row["top_logprobs"][i][0] <= 0
            assert row["top_logprobs"][i] == sorted(row["top_logprobs"][i], reverse=True)
    assert pq.read_schema(layout.export("turns.topk.parquet")).equals(tables.TOPK_SIDECAR)
    manifest = json.loads(layout.export("manifest.json").read_text())["capture"]
    assert (manifest["logprobs"], manifest["top_k"], manifest["rows"]) == (True, 5, 4)

    # the per-turn signal is the parts' chosen logprobs summarised, and the logprobs are the model's own
    parts = {(r["conversation_id"], r["turn"]): r for r in part_rows(layout)}
    for d in pq.read_table(layout.dataset).to_pylist():
        part = parts[d["conversation_id"], d["turn"]]
        assert d["logprob_mean"] == pytest.approx(np.mean(part["token_logprobs"]))
        assert d["logprob_min"] == pytest.approx(min(part["token_logprobs"]))
        entropy = np.mean([-sum(math.exp(x) * x for x in lps) for lps in part["top_logprobs"]])
        assert d["topk_entropy_mean"] == pytest.approx(entropy) and d["topk_entropy_mean"] >= 0
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(demo_model, dtype=torch.float32).eval()
    row = next(iter(rows.values()))
    ids, mask = row["input_ids"], row["loss_mask"]
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0].float()
    expected = torch.log_softmax(logits, -1)
    start = mask.index(1)
    recomputed = [expected[p - 1, ids[p]].item() for p in range(start, len(ids))]
    conversation, turn = row["id"].rsplit("#", 1)
    captured = parts[conversation, int(turn)]["token_logprobs"]
    np.testing.assert_allclose(captured, recomputed, atol=2e-3)


def test_a_shard_killed_and_resumed_keeps_one_sidecar_row_per_turn(make_config, write_jsonl):
    rows = [{"query": f"Problem {i}: what is {i} times {i + 3}?"} for i in range(9)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                        "sampling": GREEDY}], capture={"logprobs": True, "top_k": 3}, shards=1,
                      checkpoint={"every_records": 3, "every_seconds": 30}, engine={"max_running_requests": 2})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    rc, err = generate(cfg, layout, "after_rename:2")  # killed right after its second part is committed
    assert rc != 0 and len(list(layout.shard_dir(0).glob("part-*.parquet"))) == 2, err[-2000:]
    rc, err = generate(cfg, layout)
    assert rc == 0, err[-2000:]
    # and a turn committed twice (a second attempt's row of the same gen_key): the winner's row alone counts
    first = sorted(layout.shard_dir(0).glob("part-*.parquet"))[0]
    pq.write_table(pq.read_table(first), layout.shard_dir(0) / "part-900000.parquet")
    finish(cfg, layout)
    side, dataset = sidecar(layout), pq.read_table(layout.dataset).to_pylist()
    ids = pq.read_table(layout.export("turns.topk.parquet"), columns=["id"])["id"].to_pylist()
    assert len(ids) == len(set(ids)) == len(dataset) == 9
    assert set(side) == set(turns(layout))


@pytest.mark.parametrize("everywhere, own, captured", [
    (False, {"b": True}, ["b"]),  # capture off, one source asks for it
    (True, {"a": False}, ["b"]),  # capture on, one source leaves it
])
def test_a_source_turns_capture_on_or_off_for_its_own_turns(make_config, write_jsonl, everywhere, own, captured):
    sources = [{"name": name, "path": write_jsonl(f"{name}.jsonl", [{"query": f"{name} asks {i}?"} for i in range(3)]),
                "format": "query_response", "sampling": GREEDY, **({"capture": own[name]} if name in own else {})}
               for name in ("a", "b")]
    cfg = make_config(sources, capture={"logprobs": everywhere, "top_k": 2}, shards=1)
    layout = stage(cfg, 1)
    finish(cfg, layout)
    by_source = {}
    for d in pq.read_table(layout.dataset).to_pylist():
        # the top-k entropy comes only with the capture; the signal is every turn's (capture.signal)
        by_source.setdefault(d["source"], set()).add((d["topk_entropy_mean"] is not None, d["logprob_mean"] is None))
    assert by_source == {"a": {("a" in captured, False)}, "b": {("b" in captured, False)}}
    sources_of = {r["conversation_id"]: r["source"] for r in pq.read_table(layout.dataset).to_pylist()}
    assert sorted({sources_of[i.rsplit("#", 1)[0]] for i in sidecar(layout)}) == captured
    assert len(sidecar(layout)) == 3 and all(len(r["top_ids"][0]) == 2 for r in sidecar(layout).values())
    manifest = json.loads(layout.export("manifest.json").read_text())["capture"]
    assert (manifest["sources"], manifest["rows"]) == (captured, 3)


@pytest.mark.parametrize("top_k, said", [(-1, "less than the minimum of 0"), (65, "greater than the maximum of 64")])
def test_a_bad_top_k_fails_at_config_time_naming_the_key(make_config, write_jsonl, top_k, said):
    with pytest.raises(ConfigError, match=rf"capture\.top_k: {top_k} is {said}"):
        make_config([{"name": "q", "path": write_jsonl("q.jsonl", [{"query": "x"}]), "format": "query_response"}],
                    capture={"logprobs": True, "top_k": top_k})
