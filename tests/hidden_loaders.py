"""The hidden-state exports read by the trainers' own offline code, unmodified (SpecForge 0.2.0's EAGLE-3 and DFlash
readers, normalizers and collators; speculators 0.9.0's ArrowDataset and collate through the backend the export
names), each sample checked against its turns.jsonl row (same ids and loss mask) and its winning turn's states as
the parts committed them; and an HF forward's states to check those against. Shared by the generate and merge
tests and the workflow's end-to-end capture test."""

import json
from argparse import Namespace
from pathlib import Path

import torch

from shardgen.capture import LAST_BEFORE_NORM, decoded
from shardgen.generate import checkpoint
from shardgen.layout import Layout
from shardgen.merge.hidden_exports import RECORD, captured, roles
from shardgen.store.hidden import read_turn

MAX_LEN = 4096


def reference(model_path, ids: list[int], layers: list) -> torch.Tensor:
    """An HF forward's output_hidden_states at `layers`, float32; last_before_norm: the last decoder layer's own
    output (a hook on that layer, not on the norm the engine hooks)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    last_layer = []
    hook = model.get_decoder().layers[-1].register_forward_hook(
        lambda _, args, out: last_layer.append(out[0] if isinstance(out, tuple) else out))
    with torch.inference_mode():
        out = model(torch.tensor([ids]), use_cache=False, output_hidden_states=True)
    hook.remove()
    return torch.stack([(last_layer[0] if i == LAST_BEFORE_NORM else out.hidden_states[i])[0] for i in layers], dim=1)


def stored_by_ids(layout: Layout) -> dict[tuple, dict]:
    """prompt_ids + output_ids of each dataset turn with states -> its winning part's stored tensors."""
    con = checkpoint.connect(layout)
    found = captured(con)
    rows = con.execute("SELECT gen_key, list_concat(prompt_ids, output_ids) FROM dataset").fetchall()
    return {tuple(ids): read_turn(found.states[key], key) for key, ids in rows if key in found.states}


def turns(layout: Layout) -> dict[tuple, dict]:
    """turns.jsonl's rows by their input_ids."""
    rows = [json.loads(line) for line in layout.export("turns.jsonl").read_text().splitlines()]
    return {tuple(r["input_ids"]): r for r in rows}


def record(folder: Path) -> dict:
    return json.loads((Path(folder) / RECORD).read_text())


def specforge_eagle3(folder: Path, layout: Layout) -> int:
    """SpecForge's offline EAGLE-3 dataset and collator over the export: every sample a turn's ids, mask (SpecForge
    zeroes the last position itself), aux layers and L as committed; returns the samples read."""
    from specforge.algorithms.eagle3.data import build_offline_collator, normalize_offline_sample
    from specforge.data.preprocessing import OfflineEagle3Dataset
    from specforge.runtime.data_plane.offline_reader import OfflineManifestReader, list_feature_files

    role, stored, rows = roles(record(folder)), stored_by_ids(layout), turns(layout)
    refs = OfflineManifestReader(str(folder), validate_files=True).read()  # checks the four keys are tensors
    dataset = OfflineEagle3Dataset(list_feature_files(str(folder)), max_len=MAX_LEN)
    samples = list(dataset)
    for sample, ref in zip(samples, refs):
        ids = tuple(sample["input_ids"][0].tolist())
        states = decoded(stored[ids], torch.bfloat16)
        assert sample["loss_mask"][0].tolist()[:-1] == rows[ids]["loss_mask"][:-1]
        assert torch.equal(sample["target"][0], states[:, role["last"]])  # L, after the final norm
        assert torch.equal(sample["hidden_state"][0], states[:, role["aux"]].flatten(1))
        assert ref.num_tokens == len(ids)
        raw = torch.load(ref.feature_store_uri.removeprefix("file://"), weights_only=True)
        assert torch.equal(normalize_offline_sample(raw, MAX_LEN)["target"], sample["target"])
    batch = build_offline_collator()(samples)
    assert batch["hidden_state"].shape[:2] == batch["input_ids"].shape == (len(samples), max(map(len, stored)))
    return len(samples)


def specforge_dflash(folder: Path, layout: Layout) -> int:
    """SpecForge's offline DFlash reader, normalizer and collator: the aux layers as committed, every sample one it
    trains on (two consecutive supervised tokens); returns the samples read."""
    from specforge.algorithms.common.dflash_family_data import (build_collator, build_offline_reader,
                                                                normalize_offline_sample)

    role, stored, rows = roles(record(folder)), stored_by_ids(layout), turns(layout)
    refs = build_offline_reader("dflash", str(folder), run_id="test", ttt_length=1, max_len=MAX_LEN).read()
    samples = []
    for ref in refs:
        sample = normalize_offline_sample(torch.load(ref.feature_store_uri.removeprefix("file://"),
                                                     weights_only=True), MAX_LEN)  # raises on a sample it refuses
        ids = tuple(sample["input_ids"][0].tolist())
        assert sample["loss_mask"][0].tolist() == rows[ids]["loss_mask"]
        assert torch.equal(sample["hidden_states"][0], decoded(stored[ids], torch.bfloat16)[:, role["aux"]].flatten(1))
        samples.append(sample)
    if samples:
        assert build_collator()(samples)["hidden_states"].shape[0] == len(samples)
    return len(samples)


def speculators_transfer(folder: Path):
    """The transfer speculators' trainer builds for this export: the backend its `--hidden-states-backend` flag
    names (the export's train flags; none: speculators' default, `file`), through speculators' own registry."""
    from hs_connectors.transfer import HiddenStatesBackend

    backend = record(folder)["train"]["flags"].get("--hidden-states-backend", "file")
    return HiddenStatesBackend.registry[backend].from_train_args(Namespace(hidden_states_path=None), str(folder))


def speculators(folder: Path, layout: Layout) -> int:
    """speculators' ArrowDataset and collate over the export, through the backend the export names: the aux layers
    and the final norm's input as committed (fp8: its values times their scales); returns the samples read."""
    from speculators.models.utils import resolve_target_layer_ids
    from speculators.train.data import ArrowDataset, CollateFn

    written = record(folder)
    role, stored, rows = roles(written), stored_by_ids(layout), turns(layout)
    target_ids = [int(i) for i in written["train"]["flags"]["--target-layer-ids"].split()]
    assert resolve_target_layer_ids(target_ids, written["model"]) == target_ids  # speculators' own check
    dataset = ArrowDataset(max_len=MAX_LEN, datapath=str(folder), transfer=speculators_transfer(folder),
                           on_missing="raise")
    samples = [dataset[i] for i in range(len(dataset))]
    for sample in samples:
        ids = tuple(sample["input_ids"].tolist())
        assert sample["loss_mask"].tolist() == rows[ids]["loss_mask"]
        states = decoded(stored[ids], torch.bfloat16)  # fp8: the fp8 backend dequantizes as decoded does
        assert torch.equal(sample["hidden_states"].to(torch.bfloat16), states[:, role["aux"]].flatten(1))
        assert torch.equal(sample["verifier_last_hidden_states"].to(torch.bfloat16), states[:, role["before_norm"]])
    hidden = next(iter(stored.values()))["states"].shape[-1]
    batch = CollateFn(MAX_LEN, hidden, num_target_layers=len(target_ids))(samples)
    assert batch["hidden_states"].shape == (1, MAX_LEN, len(target_ids) * hidden)
    return len(samples)


LOADERS = {"specforge": specforge_eagle3, "specforge_dflash": specforge_dflash, "speculators": speculators}
