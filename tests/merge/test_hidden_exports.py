"""The hidden-state exports load through the trainers' own offline code, unmodified: SpecForge 0.2.0's offline
EAGLE-3 reader and normalizer, speculators 0.9.0's ArrowDataset (bfloat16, and fp8 through hs_connectors'
FP8Transfer); each sample is a turns.jsonl row (same ids and loss mask) with its winning turn's states; the
manifest lists them; with capture off neither folder is written."""

import json
from pathlib import Path

import pytest
import torch

from shardgen.capture import decoded, named_layers
from shardgen.layout import Layout, hidden_part_path
from shardgen.merge.dataset import merge
from shardgen.merge.exports import ExportRules, write_manifest
from shardgen.store.hidden import read_turn

from helpers import stage

GREEDY = {"temperature": 0.0, "max_new_tokens": 6}
AUX, LAST, BEFORE_NORM = [0, 1, 2], 3, 4  # eagle3's layers as stored: [2, L//2, L-3], L, last_before_norm


def run(make_config, write_jsonl, hidden: dict) -> tuple:
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(3)]
    cfg = make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                        "sampling": GREEDY}], capture={"hidden_states": hidden}, shards=1)
    layout = stage(cfg, 1)
    record = merge(layout, layout.dataset, layout.dataset_dir / "train.jsonl", layout.root / "merge" / "failed.parquet",
                   rules=ExportRules(cfg.model.reasoning_tags, cfg.exports.on_length, hidden_states=True))
    write_manifest(cfg, layout, record)
    turns = [json.loads(line) for line in layout.export("turns.jsonl").read_text().splitlines()]
    return cfg, layout, sorted(turns, key=lambda t: t["id"])


def stored_states(layout: Layout) -> dict[tuple, torch.Tensor]:
    """input_ids -> the committed states, decoded to bfloat16 (what the exports carry)."""
    from shardgen.store.hidden import read_header

    found = {}
    for part in sorted(layout.shard_dir(0).glob("part-*.parquet")):
        import pyarrow.parquet as pq
        keys = pq.read_table(part, columns=["gen_key"])["gen_key"].to_pylist()
        held = read_header(hidden_part_path(part))["gen_keys"]
        found.update({k: decoded(read_turn(hidden_part_path(part), k), torch.bfloat16) for k in keys if k in held})
    return found


def test_specforge_offline_eagle3_reads_the_export(make_config, write_jsonl, demo_model):
    from specforge.algorithms.eagle3.data import normalize_offline_sample
    from specforge.data.preprocessing import OfflineEagle3Dataset
    from specforge.runtime.data_plane.offline_reader import OfflineManifestReader, list_feature_files

    _, layout, turns = run(make_config, write_jsonl, {"enabled": True})
    folder = layout.hidden_export("specforge")
    refs = OfflineManifestReader(str(folder), validate_files=True).read()  # checks the four keys are tensors
    assert len(refs) == len(turns) == 3
    dataset = OfflineEagle3Dataset(list_feature_files(str(folder)), max_len=2048)
    states = list(stored_states(layout).values())
    hidden = states[0].shape[-1]
    for turn, sample, ref in zip(turns, dataset, refs):
        assert sample["input_ids"][0].tolist() == turn["input_ids"]
        assert sample["loss_mask"][0].tolist()[:-1] == turn["loss_mask"][:-1]  # SpecForge zeroes the last itself
        assert sample["hidden_state"].shape == (1, len(turn["input_ids"]), 3 * hidden)  # aux: 3 layers
        assert sample["target"].shape == (1, len(turn["input_ids"]), hidden)
        assert ref.num_tokens == len(turn["input_ids"])
        raw = torch.load(ref.feature_store_uri.removeprefix("file://"), weights_only=True)
        assert torch.equal(normalize_offline_sample(raw, 2048)["target"], sample["target"])
        match = [s for s in states if torch.equal(s[:, LAST], sample["target"][0])]  # L, after the final norm
        assert len(match) == 1 and torch.equal(match[0][:, AUX].flatten(1), sample["hidden_state"][0])


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_speculators_arrow_dataset_reads_the_export(make_config, write_jsonl, demo_model, dtype):
    from hs_connectors.transfer import FileTransfer, FP8Transfer
    from speculators.train.data import ArrowDataset

    cfg, layout, turns = run(make_config, write_jsonl, {"enabled": True, "dtype": dtype})
    folder = layout.hidden_export("speculators")
    transfer = (FP8Transfer if dtype == "float8_e4m3fn" else FileTransfer)(Path(folder) / "hidden_states")
    dataset = ArrowDataset(max_len=2048, datapath=str(folder), transfer=transfer, on_missing="raise")
    states = list(stored_states(layout).values())
    assert len(dataset) == len(turns) == 3
    for i, turn in enumerate(turns):
        sample = dataset[i]
        assert sample["input_ids"].tolist() == turn["input_ids"] and sample["loss_mask"].tolist() == turn["loss_mask"]
        last = sample["verifier_last_hidden_states"].to(torch.bfloat16)  # the final norm's input, as vLLM gives it
        match = [s for s in states if torch.equal(s[:, BEFORE_NORM], last)]
        assert len(match) == 1 and not torch.equal(match[0][:, LAST], last)
        assert torch.equal(match[0][:, AUX].flatten(1), sample["hidden_states"].to(torch.bfloat16))
    manifest = json.loads(layout.exports_manifest.read_text())["hidden_states"]
    layers = named_layers("eagle3", json.loads((demo_model / "config.json").read_text())["num_hidden_layers"])
    assert manifest["layers"] == [layers] and manifest["dtype"] == [dtype]
    assert manifest["model_hash"] == cfg.target_model.fingerprint["model"]
    assert manifest["exports"]["speculators"]["samples"] == 3 and manifest["exports"]["speculators"]["bytes"] > 0


def test_capture_off_writes_no_hidden_export(make_config, write_jsonl):
    _, layout, turns = run(make_config, write_jsonl, {})
    assert turns and not (layout.exports_dir / "hidden").exists()
    assert json.loads(layout.exports_manifest.read_text())["hidden_states"] is None


def test_specforge_offline_dflash_reads_the_export(make_config, write_jsonl):
    """The dflash layer set: SpecForge's DFlash sample (its target layer, no last) through its own normalizers, and
    speculators' export beside it; no EAGLE-3 export, whose last layer (L) is not in the set."""
    from specforge.algorithms.common.dflash_family_data import normalize_offline_sample
    from specforge.data.preprocessing import process_offline_dflash_sample
    from specforge.runtime.data_plane.offline_reader import OfflineManifestReader, list_feature_files

    _, layout, turns = run(make_config, write_jsonl, {"enabled": True, "layers": "dflash"})
    folder = layout.hidden_export("specforge_dflash")
    refs = OfflineManifestReader(str(folder), feature_keys=("input_ids", "loss_mask", "hidden_states"),
                                 target_repr=None, validate_files=True).read()
    files = list_feature_files(str(folder))
    assert len(refs) == len(files) == len(turns) == 3
    states = list(stored_states(layout).values())
    for turn, path in zip(turns, files):
        raw = torch.load(path, weights_only=True)
        sample = process_offline_dflash_sample(raw, 2048)
        assert torch.equal(normalize_offline_sample(raw, 2048)["hidden_states"], sample["hidden_states"])
        assert sample["input_ids"][0].tolist() == turn["input_ids"]
        assert sample["loss_mask"][0].tolist() == turn["loss_mask"]
        assert sample["hidden_states"].shape == (1, len(turn["input_ids"]), states[0].shape[-1])  # one layer
        assert len([s for s in states if torch.equal(s[:, 0], sample["hidden_states"][0])]) == 1
    manifest = json.loads(layout.exports_manifest.read_text())["hidden_states"]
    assert sorted(manifest["exports"]) == ["specforge_dflash", "speculators"]
    assert not layout.hidden_export("specforge").exists()
