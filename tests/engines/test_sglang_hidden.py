"""Hidden-state capture through the SGLang adapter (engines/sglang/hidden.py) against tests/fake_sglang, whose model
has NemotronH's module names and call structure in SGLang 0.5.17 and deterministic layer values (fake_model.py):
every position of prompt + output gets the right layer's vector, each turn's states are committed once with its
part, and SpecForge's offline reader loads them from the export made of them. No GPU: nothing here claims one ran."""

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import torch

from shardgen.capture import LAST_BEFORE_NORM, HiddenCapture
from shardgen.engines.sglang.hidden_hooks import hook_specs
from shardgen.layout import hidden_part_path
from shardgen.merge.dataset import merge
from shardgen.merge.exports import ExportRules, write_manifest
from shardgen.merge.hidden_exports import export
from shardgen.store.hidden import read_header

from helpers import FAKE, generate_captured_shard

NH8B = Path(__file__).resolve().parents[1] / "data" / "models" / "nh8b" / "config.json"


def expected(ids: list[int], layer, num_layers: int, hidden: int) -> torch.Tensor:
    """The fake model's vector at `layer` (fake_model.py): the stream before it; L the final norm's (doubling)
    output; last_before_norm the final norm's input."""
    sys.path.insert(0, str(FAKE))
    try:
        from sglang.fake_model import stream
    finally:
        sys.path.remove(str(FAKE))
    if layer == LAST_BEFORE_NORM:
        return stream(ids, num_layers, hidden)
    return stream(ids, layer, hidden) * (2 if layer == num_layers else 1)


def test_the_adapter_returns_every_positions_states_committed_once_and_exported(make_config, write_jsonl,
                                                                                 monkeypatch, demo_model):
    # the fake's prefix cache is on (no_buffer): the pass must get past it
    cfg, layout = generate_captured_shard(make_config, write_jsonl, monkeypatch, "no_buffer")

    model = json.loads((demo_model / "config.json").read_text())
    num_layers, hidden = model["num_hidden_layers"], model["hidden_size"]
    layers = HiddenCapture("eagle3", "bfloat16").layer_ids(num_layers)
    committed = []
    for part in sorted(layout.shard_dir(0).glob("part-*.parquet")):
        keys = pq.read_table(part, columns=["gen_key"])["gen_key"].to_pylist()
        header = read_header(hidden_part_path(part))
        assert header["layers"] == layers and sorted(header["gen_keys"]) == sorted(keys)
        committed += header["gen_keys"]
    assert len(committed) == len(set(committed)) == 5  # once per turn, none missing
    assert not list((layout.shard_dir(0)).rglob("hidden-*.safetensors"))  # every hand-off file read and removed

    record = merge(layout, layout.dataset, layout.dataset_dir / "train.jsonl", layout.root / "merge" / "failed.parquet",
                   rules=ExportRules(cfg.model.reasoning_tags, cfg.exports.on_length, hidden_states=True))
    write_manifest(cfg, layout, record)
    export(cfg, layout, "specforge")
    from specforge.data.preprocessing import OfflineEagle3Dataset
    from specforge.runtime.data_plane.offline_reader import list_feature_files

    turns = [json.loads(line) for line in layout.export("turns.jsonl").read_text().splitlines()]
    dataset = OfflineEagle3Dataset(list_feature_files(str(layout.hidden_export("specforge"))), max_len=2048)
    samples = {tuple(s["input_ids"][0].tolist()): s for s in dataset}
    assert len(samples) == len(turns) == 5
    for turn in turns:
        ids, sample = turn["input_ids"], samples[tuple(turn["input_ids"])]
        below_last = [i for i in layers if i != LAST_BEFORE_NORM and i < num_layers]
        aux = torch.cat([expected(ids, i, num_layers, hidden) for i in below_last], dim=1).to(torch.bfloat16)
        assert torch.equal(sample["hidden_state"][0], aux)  # [2, L//2, L-3] once each, at every position
        assert torch.equal(sample["target"][0], expected(ids, num_layers, num_layers, hidden).to(torch.bfloat16))


def test_the_hooks_sit_on_exact_module_names_of_nemotron_h(tmp_path):
    """fnmatch's `*` crosses dots: a pattern would also catch each Mamba mixer's own norm."""
    specs = hook_specs("NemotronHForCausalLM", [0, 2, 26, 49, 52, LAST_BEFORE_NORM], 52, tmp_path)
    assert [s["target_modules"] for s in specs] == [["model.embed_tokens"], ["model.layers.2.norm"],
                                                   ["model.layers.26.norm"], ["model.layers.49.norm"],
                                                   ["model.norm_f"], ["logits_processor"]]
    assert specs[-2]["config"]["keys"] == [52, LAST_BEFORE_NORM]


def test_eagle3_layers_are_sglangs_own_rule_for_nh8b():
    """SGLang 0.5.17's default EAGLE-3 capture (models/llama.py:885-892, shared by its other models): layers_to_capture
    = [2, L // 2, L - 3], each taken as hidden_states + residual before that layer (llama.py:434-437), i.e. HF's
    output_hidden_states index. NemotronH (models/nemotron_h.py) has no set_eagle3_layers_to_capture in 0.5.17;
    for nh8b's 52 layers the rule gives [2, 26, 49]."""
    num_layers = json.loads(NH8B.read_text())["num_hidden_layers"]
    assert num_layers == 52
    assert HiddenCapture("eagle3", "bfloat16").layer_ids(num_layers) == [2, 26, 49, 52, LAST_BEFORE_NORM]
