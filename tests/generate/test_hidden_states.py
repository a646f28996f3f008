"""Hidden-state capture (config `capture.hidden_states`) on the CPU engine: each generated turn's states at the
chosen layers equal a Hugging Face forward with output_hidden_states over its prompt_ids + output_ids (float32 to
1e-5, bfloat16 and fp8 within their rounding); committed with the turn (a shard killed between a part's states and
the part resumes with one set per turn, none missing, none twice); nothing written when off; the layer sets, each
id once and ascending; and before the first request, a layer past the model (a config error) or states the disk
cannot hold (unless told to run anyway) stop generate."""

import glob
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM

from shardgen.capture import LAST_BEFORE_NORM, HiddenCapture, decoded, named_layers
from shardgen.config import ConfigError
from shardgen.generate import checkpoint, hidden_preflight
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout, hidden_part_path
from shardgen.prompts.split import split
from shardgen.prompts.stage import build_prompts
from shardgen.store import db
from shardgen.store.hidden import read_header, read_turn

from helpers import generate, stage
from hidden_loaders import reference

GREEDY = {"temperature": 0.0, "max_new_tokens": 6}


def config(make_config, write_jsonl, hidden: dict, n: int = 4, **overrides):
    rows = [{"query": f"What is {i} plus {i + 1}?"} for i in range(n)]
    return make_config([{"name": "q", "path": write_jsonl("q.jsonl", rows), "format": "query_response",
                         "sampling": GREEDY}], capture={"hidden_states": hidden}, shards=1, **overrides)


def winners(layout: Layout) -> list[dict]:
    """Each generated turn's winning row, its prompt_ids (turn 1's from the prompts table) and its part."""
    con = checkpoint.connect(layout)
    con.execute(f"CREATE OR REPLACE VIEW prompts AS SELECT * FROM read_parquet({db.quote(layout.prompts)})")
    db.define_views(con, "winners")
    rows = con.execute("SELECT w.gen_key, w.filename, p.prompt_ids AS own, q.prompt_ids AS first, p.output_ids "
                       "FROM winners w JOIN parts p USING (filename, file_row_number) "
                       "LEFT JOIN prompts q ON q.gen_key = p.gen_key").fetchall()
    return [{"gen_key": k, "part": Path(f), "ids": list(own or first) + list(out)} for k, f, own, first, out in rows]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_every_turn_has_the_hf_forward_states_at_its_layers(make_config, write_jsonl, demo_model, dtype):
    cfg = config(make_config, write_jsonl, {"enabled": True, "dtype": dtype})
    layout = stage(cfg, 1)
    turns = winners(layout)
    num_layers = AutoModelForCausalLM.from_pretrained(demo_model).config.num_hidden_layers
    layers = named_layers("eagle3", num_layers)
    assert len(turns) == 4
    for turn in turns:
        header = read_header(hidden_part_path(turn["part"]))
        assert header["layers"] == layers and header["dtype"] == dtype
        stored = read_turn(hidden_part_path(turn["part"]), turn["gen_key"])
        want = reference(demo_model, turn["ids"], layers)
        got = decoded(stored)
        assert got.shape == want.shape == (len(turn["ids"]), len(layers), want.shape[-1])
        if dtype == "bfloat16":  # 8 significant bits: half an ulp of the value
            assert torch.all((got - want).abs() <= want.abs() * 2 ** -8 + 1e-30)
        else:  # e4m3: 3 mantissa bits, subnormals below 2^-6 of the scale
            scale = stored["scale"]
            assert stored["states"].dtype == torch.float8_e4m3fn and scale.shape == (len(turn["ids"]), 1, 1)
            assert torch.all((got - want).abs() <= torch.maximum(want.abs() * 2 ** -4, scale * 2 ** -9) * 1.001)


def test_float32_states_equal_the_hf_forward(make_config, write_jsonl, demo_model):
    """The engine's own float32 states, before storage: max abs difference <= 1e-5 at explicit layers."""
    from shardgen.engines.transformers.hidden import turn_states

    model = AutoModelForCausalLM.from_pretrained(demo_model, dtype=torch.float32).eval()
    ids = list(range(5, 40))
    layers = [0, 1, model.config.num_hidden_layers, LAST_BEFORE_NORM]
    assert (turn_states(model, ids, layers, "cpu") - reference(demo_model, ids, layers)).abs().max() <= 1e-5


def test_last_before_norm_is_the_final_norms_input_not_hfs_last(demo_model):
    """speculators' last (vLLM's id L) is the final norm's input; HF's index L is that norm's output (SpecForge's)."""
    from shardgen.engines.transformers.hidden import final_norm, turn_states

    model = AutoModelForCausalLM.from_pretrained(demo_model, dtype=torch.float32).eval()
    ids, top = list(range(5, 40)), model.config.num_hidden_layers
    states = turn_states(model, ids, [top, LAST_BEFORE_NORM], "cpu")
    with torch.inference_mode():
        normed = final_norm(model)(states[:, 1])
    assert (normed - states[:, 0]).abs().max() <= 1e-5 and (states[:, 1] - states[:, 0]).abs().max() > 0.1


def test_off_writes_nothing(make_config, write_jsonl):
    layout = stage(config(make_config, write_jsonl, {}), 1)
    assert list(layout.shard_dir(0).glob("part-*.parquet")) and not glob.glob(str(layout.shard_dir(0) / "*.hidden*"))


def test_a_shard_killed_between_states_and_part_resumes_with_one_set_per_turn(make_config, write_jsonl):
    cfg = config(make_config, write_jsonl, {"enabled": True}, n=9, checkpoint={"every_records": 3,
                                                                               "every_seconds": 30},
                 engine={"max_running_requests": 2})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    rc, err = generate(cfg, layout, "after_rename:3")  # part 1's states and part, then part 2's states: killed
    folder = layout.shard_dir(0)
    assert rc != 0 and len(list(folder.glob("part-*.parquet"))) == 1, err[-2000:]
    assert len(list(folder.glob("part-*.hidden.safetensors"))) == 2  # an orphan: states without their part
    rc, err = generate(cfg, layout)
    assert rc == 0, err[-2000:]
    parts = sorted(folder.glob("part-*.parquet"))
    stored = [k for p in parts for k in read_header(hidden_part_path(p))["gen_keys"]]
    committed = [r for p in parts for r in pq.read_table(p, columns=["gen_key"])["gen_key"].to_pylist()]
    assert sorted(stored) == sorted(committed) and len(set(stored)) == len(stored) == 9
    assert sorted(folder.glob("part-*.hidden.safetensors")) == [hidden_part_path(p) for p in parts]


def test_layer_sets_are_unique_and_ascending_and_a_layer_past_the_model_is_a_config_error():
    assert named_layers("eagle3", 32) == [2, 16, 29, 32, LAST_BEFORE_NORM]
    assert named_layers("eagle3", 4) == [1, 2, 4, LAST_BEFORE_NORM]  # the rule's [2, 2, 1]: each once, ascending
    assert named_layers("dflash", 32) == [17, LAST_BEFORE_NORM]
    assert HiddenCapture((LAST_BEFORE_NORM, 3, 1), "bfloat16").layer_ids(4) == [1, 3, LAST_BEFORE_NORM]
    with pytest.raises(ConfigError, match=r"capture.hidden_states.layers: \[9\] past the model's last index 4 \(the "
                                          r"model has 4 decoder layers"):
        HiddenCapture((1, 9), "bfloat16").layer_ids(4)
    assert HiddenCapture("eagle3", "float8_e4m3fn").bytes_per_token(32, 4096) == 5 * 4096 + 4


def test_a_layer_past_the_model_stops_generate_before_any_request(make_config, write_jsonl, demo_model):
    cfg = config(make_config, write_jsonl, {"enabled": True, "layers": [1, 99]})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    num_layers = AutoModelForCausalLM.from_pretrained(demo_model).config.num_hidden_layers
    with pytest.raises(ConfigError, match=rf"capture.hidden_states.layers: \[99\] .*model has {num_layers} decoder"):
        generate_shard(cfg, 0, layout.done(0))
    assert not (layout.shard_dir(0) / "attempts.jsonl").exists()  # no engine started, no request sent


def test_generate_refuses_a_shard_whose_states_do_not_fit_the_disk(make_config, write_jsonl, demo_model,
                                                                   monkeypatch, caplog):
    """The forecast (every remaining turn at its max_new_tokens x bytes per position) against the results folder's
    free space: too little stops the shard before its first request, naming both figures and the key that runs it
    anyway; with the key, it runs."""
    cfg = config(make_config, write_jsonl, {"enabled": True})
    layout = Layout(cfg.results)
    build_prompts(cfg, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    model = json.loads((demo_model / "config.json").read_text())
    per_token = HiddenCapture("eagle3", "bfloat16").bytes_per_token(model["num_hidden_layers"], model["hidden_size"])
    positions = sum(pq.read_table(layout.prompts, columns=["work_tokens"])["work_tokens"].to_pylist())
    monkeypatch.setattr(hidden_preflight, "free_bytes", lambda folder: positions * per_token - 1)
    with pytest.raises(hidden_preflight.ShortDiskError) as refused:
        generate_shard(cfg, 0, layout.done(0))
    assert f"({positions * per_token:,} bytes" in str(refused.value)
    assert f"({positions * per_token - 1:,} bytes)" in str(refused.value)
    assert "capture.hidden_states.allow_short_disk: true" in str(refused.value)
    assert not (layout.shard_dir(0) / "attempts.jsonl").exists()
    monkeypatch.setattr(hidden_preflight, "free_bytes", lambda folder: positions * per_token)
    assert generate_shard(cfg, 0, layout.done(0))["generated"] == 4  # it fits: it runs
    short = config(make_config, write_jsonl, {"enabled": True, "allow_short_disk": True}, n=6)
    build_prompts(short, layout.prompts_dir)
    split(layout.prompts, layout.split_dir, 1)
    monkeypatch.setattr(hidden_preflight, "free_bytes", lambda folder: 0)
    assert generate_shard(short, 0, layout.done(0))["generated"] == 6  # told to run anyway


def test_the_sglang_backend_refuses_it_naming_the_key(make_config, write_jsonl):
    # one GPU per engine: tensor parallelism fuses the hooked norms with the all-reduce (engines/sglang/hidden.py)
    with pytest.raises(ConfigError, match="capture.hidden_states: the sglang backend"):
        config(make_config, write_jsonl, {"enabled": True}, engine={"backend": "sglang", "tp_size": 2})
