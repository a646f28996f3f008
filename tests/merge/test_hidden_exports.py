"""The hidden-state exports, made on demand by `shardgen export-hidden` from the merged dataset's parts, load through
the trainers' own offline code, unmodified (tests/hidden_loaders.py), with the command and flags export.json names;
the DFlash export leaves out what SpecForge's DFlash refuses and counts it; fp8 reads as its values only through
the backend the export names; merge writes no export, records per trainer the command or why it cannot be made;
an export is replaced whole, an interrupted one leaves nothing, and turns captured at two settings make none until
`shardgen reset`."""

import json
from pathlib import Path

import pytest
import torch

import hidden_loaders
from shardgen.capture import LAST_BEFORE_NORM, named_layers
from shardgen.cli import main
from shardgen.generate.reset import reset_shard
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout
from shardgen.merge import hidden_exports, hidden_writers
from shardgen.merge.stage import run as merge_step
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts

from helpers import stage

GREEDY = {"temperature": 0.0, "max_new_tokens": 6}


def config(make_config, write_jsonl, hidden: dict, n: int = 3, **overrides):
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(n)]
    return make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                         "sampling": GREEDY}], capture={"hidden_states": hidden}, **{"shards": 1, **overrides})


def merged(cfg, shards: int = 1) -> Layout:
    layout = stage(cfg, shards)
    merge_step(cfg, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    return layout


def manifest(layout: Layout) -> dict:
    return json.loads(layout.exports_manifest.read_text())["hidden_states"]


def export_hidden(cfg, trainer: str, *args: str) -> int:
    """`shardgen export-hidden` as a user runs it (in-process: its exit code)."""
    return main(["--config", str(cfg.write_resolved()), "export-hidden", "--trainer", trainer, *args])


def test_specforge_eagle3_reads_the_export_and_its_run_config(make_config, write_jsonl, capsys):
    from specforge.config import load_config

    cfg = config(make_config, write_jsonl, {"enabled": True})
    layout = merged(cfg)
    assert not layout.hidden_exports_dir.exists()  # merge writes none
    assert manifest(layout)["exports"]["specforge"]["make"] == "shardgen export-hidden --trainer specforge"
    assert export_hidden(cfg, "specforge") == 0
    folder = layout.hidden_export("specforge")
    assert hidden_loaders.specforge_eagle3(folder, layout) == 3
    written = hidden_loaders.record(folder)
    assert written["samples"] == 3 and written["left_out"] == {} and written["dtype"] == "bfloat16"
    assert written["bytes"] == sum(p.stat().st_size for p in folder.rglob("*") if p.name != "export.json")
    assert f"train: {written['train']['command']}" in capsys.readouterr().out
    run = load_config(written["train"]["command"].split("--config ")[1])  # SpecForge's own config loader
    assert (run.mode, run.training.strategy, Path(run.data.hidden_states_path)) == ("offline", "eagle3",
                                                                                     folder.absolute())
    assert run.data.max_length == cfg.model.context_length


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_speculators_reads_the_export_through_the_backend_it_names(make_config, write_jsonl, dtype):
    cfg = config(make_config, write_jsonl, {"enabled": True, "dtype": dtype})
    layout = merged(cfg)
    assert export_hidden(cfg, "speculators") == 0
    folder = layout.hidden_export("speculators")
    assert hidden_loaders.speculators(folder, layout) == 3
    flags = hidden_loaders.record(folder)["train"]["flags"]
    assert flags.get("--hidden-states-backend") == ("fp8" if dtype == "float8_e4m3fn" else None)
    assert manifest(layout)["exports"]["speculators"]["train"]["flags"] == flags
    assert manifest(layout)["dtype"] == dtype


def test_fp8_reads_as_its_values_only_through_speculators_fp8_backend(make_config, write_jsonl, demo_model):
    """speculators' default `file` backend hands its trainer the raw fp8 codes; the `fp8` backend the export names
    (--hidden-states-backend fp8) returns the HF forward's states within e4m3 rounding."""
    from hs_connectors.transfer import FileTransfer

    cfg = config(make_config, write_jsonl, {"enabled": True, "dtype": "float8_e4m3fn"}, n=2)
    layout = merged(cfg)
    assert export_hidden(cfg, "speculators") == 0
    folder = layout.hidden_export("speculators")
    written = hidden_loaders.record(folder)
    assert written["train"]["flags"]["--hidden-states-backend"] == "fp8"
    assert "--hidden-states-backend fp8" in written["train"]["command"]
    layers = written["layers"][:-2] + [LAST_BEFORE_NORM]  # the aux layers, then the final norm's input
    read = hidden_loaders.speculators_transfer(folder)
    for index in range(written["samples"]):
        sample, raw = read.get_cached(index), FileTransfer(folder / "hidden_states").get_cached(index)
        want = hidden_loaders.reference(demo_model, sample["token_ids"].tolist(), layers)
        values, scale = sample["hidden_states"].float(), raw["hidden_states_scales"]  # amax over every layer / 448
        # e4m3: 3 mantissa bits, subnormals below 2^-6 of the scale; then rounded to bfloat16 (8 bits)
        fp8 = torch.maximum(want.abs() * 2 ** -4, scale * 2 ** -9)
        assert torch.all((values - want).abs() <= (fp8 + values.abs() * 2 ** -8) * 1.001)
        codes = raw["hidden_states"]  # what the default `file` backend hands the trainer
        assert codes.dtype == torch.float8_e4m3fn and (codes.float() - want).abs().max() > 10 * want.abs().max()


def test_dflash_leaves_out_what_specforge_refuses_and_counts_it(make_config, write_jsonl):
    """A turn of one generated token has no two consecutive supervised tokens: SpecForge's DFlash stops training
    at it (normalize_offline_sample raises), so the export leaves it out and says so; speculators' export keeps
    it. SpecForge's EAGLE-3 cannot be made from dflash's layers (no L): the manifest says why, the command too."""
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(4)]
    cfg = make_config([{"name": "one", "path": write_jsonl("one.jsonl", rows[:2]), "format": "query_response",
                        "sampling": {**GREEDY, "max_new_tokens": 1}},
                       {"name": "six", "path": write_jsonl("six.jsonl", rows[2:]), "format": "query_response",
                        "sampling": GREEDY}],
                      capture={"hidden_states": {"enabled": True, "layers": "dflash"}}, shards=1)
    layout = merged(cfg)
    record = manifest(layout)
    assert sorted(record["exports"]) == ["specforge_dflash", "speculators"]
    assert record["skipped"] == {"specforge": "its last layer, L (after the final norm), was not captured"}
    assert export_hidden(cfg, "specforge") == 2
    assert export_hidden(cfg, "specforge_dflash") == 0
    folder = layout.hidden_export("specforge_dflash")
    assert hidden_loaders.specforge_dflash(folder, layout) == 2
    written = hidden_loaders.record(folder)
    assert written["samples"] == 2 and written["left_out"] == {hidden_writers.DFLASH_SHORT: 2}
    assert export_hidden(cfg, "speculators") == 0
    assert hidden_loaders.speculators(layout.hidden_export("speculators"), layout) == 4


def test_speculators_dflash_is_told_its_one_target_layer(make_config, write_jsonl, demo_model):
    """speculators defaults to three target layers ([2, L//2, L-3]); under `layers: dflash` the export holds one,
    which the command gives it (--target-layer-ids L//2+1, with --speculator-type dflash)."""
    from speculators.models.utils import resolve_target_layer_ids

    num_layers = json.loads((demo_model / "config.json").read_text())["num_hidden_layers"]
    cfg = config(make_config, write_jsonl, {"enabled": True, "layers": "dflash"}, n=1)
    layout = merged(cfg)
    flags = manifest(layout)["exports"]["speculators"]["train"]["flags"]
    assert flags["--speculator-type"] == "dflash" and flags["--target-layer-ids"] == str(num_layers // 2 + 1)
    with pytest.raises(ValueError, match="pass --target-layer-ids explicitly"):  # its default on the demo: [2, 2, 1]
        resolve_target_layer_ids(None, str(demo_model))
    nh8b = Path(__file__).resolve().parents[1] / "data" / "models" / "nh8b"
    with pytest.warns(UserWarning, match="--target-layer-ids is not explicitly set"):
        assert resolve_target_layer_ids(None, str(nh8b)) == [2, 26, 49]  # three, where dflash's export holds one
    assert hidden_exports.train("speculators", {"layers": [27, LAST_BEFORE_NORM], "num_layers": 52,
                                                "layer_set": "dflash", "dtype": "bfloat16"},
                                nh8b, str(nh8b), 8192)["flags"]["--target-layer-ids"] == "27"


def test_layer_sets_are_unique_and_ascending_in_the_files(make_config, write_jsonl, demo_model):
    """The demo's 4 layers: eagle3's rule gives [2, 2, 1]; the files hold [1, 2] once each, then L and the final
    norm's input; speculators' own check accepts the ids the export names."""
    num_layers = json.loads((demo_model / "config.json").read_text())["num_hidden_layers"]
    assert named_layers("eagle3", num_layers) == [1, 2, num_layers, LAST_BEFORE_NORM]
    cfg = config(make_config, write_jsonl, {"enabled": True, "layers": [LAST_BEFORE_NORM, 3, 0]}, n=1)
    layout = merged(cfg)
    assert manifest(layout)["layers"] == [0, 3, LAST_BEFORE_NORM]
    assert export_hidden(cfg, "speculators") == 0
    assert hidden_loaders.speculators(layout.hidden_export("speculators"), layout) == 1


def test_a_rerun_replaces_the_export_whole_and_an_interrupted_one_leaves_nothing(make_config, write_jsonl,
                                                                                  monkeypatch, tmp_path):
    cfg = config(make_config, write_jsonl, {"enabled": True})
    layout = merged(cfg)
    out = tmp_path / "features"
    assert export_hidden(cfg, "specforge", "--out", str(out)) == 0
    (out / "stale.ckpt").write_bytes(b"")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(self, index, row, stored):
        if index == 1:
            raise KeyboardInterrupt
        return add(self, index, row, stored)

    add = hidden_writers.SpecForgeEagle3.add
    monkeypatch.setattr(hidden_writers.SpecForgeEagle3, "add", interrupted)
    assert export_hidden(cfg, "specforge", "--out", str(out)) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the old export, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features", "q.jsonl", "results"]  # no .tmp, no spill
    monkeypatch.setattr(hidden_writers.SpecForgeEagle3, "add", add)
    assert export_hidden(cfg, "specforge", "--out", str(out)) == 0
    assert not (out / "stale.ckpt").exists() and hidden_loaders.specforge_eagle3(out, layout) == 3
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not an export")
    assert export_hidden(cfg, "specforge", "--out", str(mine)) == 2  # never replaces another folder
    assert (mine / "notes.txt").read_text() == "not an export"


def test_turns_captured_at_two_settings_make_no_export_until_reset(make_config, write_jsonl, caplog):
    """Shard 0 captured at eagle3's layers, shard 1 after a change to dflash's: merge records that no export can
    be made and why, export-hidden refuses naming `shardgen reset`; once shard 0 is reset and generated again at
    the new layers, every turn is captured once at them and the export is made."""
    eagle3 = config(make_config, write_jsonl, {"enabled": True}, n=4, shards=2)
    layout = Layout(eagle3.results)
    build_prompts(eagle3, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 2)
    generate_shard(eagle3, 0, layout.done(0))
    dflash = config(make_config, write_jsonl, {"enabled": True, "layers": "dflash"}, n=4, shards=2)
    generate_shard(dflash, 1, layout.done(1))
    merge_step(dflash, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    record = manifest(layout)
    assert record["exports"] == {} and set(record["skipped"]) == set(hidden_exports.TRAINERS)
    assert all("shardgen reset" in why for why in record["skipped"].values())
    assert export_hidden(dflash, "speculators") == 2
    assert "captured at different settings" in caplog.text and "shardgen reset" in caplog.text

    reset_shard(layout, 0)
    generate_shard(dflash, 0, layout.done(0))
    merge_step(dflash, layout.prompts, layout.prompt_table("sources"), layout.dataset, layout.train, layout.failed)
    assert manifest(layout)["turns_captured"] == 4 and export_hidden(dflash, "speculators") == 0
    assert hidden_loaders.speculators(layout.hidden_export("speculators"), layout) == 4


def test_merge_removes_an_old_export_and_capture_off_records_none(make_config, write_jsonl):
    cfg = config(make_config, write_jsonl, {})
    layout = Layout(cfg.results)
    layout.hidden_export("specforge").mkdir(parents=True)  # an earlier run's: the dataset it was made of is gone
    layout = merged(cfg)
    assert not layout.hidden_exports_dir.exists() and manifest(layout) is None
