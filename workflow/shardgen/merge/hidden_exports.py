"""The hidden-state exports (config capture.hidden_states), each a folder a trainer's own offline code reads
unmodified: one sample per turns.jsonl row whose turn was captured (its input_ids and loss_mask, the states at
every position), read from the turn's winning part (store/hidden.py), so merge picks the winner's states.

- `exports/hidden/specforge/data_NNNNNNNN.ckpt`: SpecForge 0.2.0's offline EAGLE-3 feature file (what
  scripts/prepare_hidden_states.py writes; read by runtime/data_plane/offline_reader.py and
  algorithms/eagle3/data.py::normalize_offline_sample): torch.save of `input_ids`, `loss_mask` ([seq] int64),
  `hidden_state` ([1, seq, H]: the last layer, what SGLang's logits processor is given) and `aux_hidden_state`
  ([1, seq, k*H]: the other layers, concatenated in order), bfloat16.
- `exports/hidden/speculators/`: speculators 0.9.0's offline layout (train/data.py::ArrowDataset): a `datasets`
  folder of `input_ids`, `loss_mask`, `seq_len`, and `hidden_states/hs_{i}.safetensors` with `token_ids` and
  `hidden_states` ([seq, layers, H], the last layer last), bfloat16; under fp8, float8_e4m3fn with
  `hidden_states_scales` ([seq, 1, 1], hs_connectors' FP8Transfer layout, read with that transfer)."""

import shutil
from pathlib import Path

from shardgen.capture import decoded
from shardgen.layout import Layout, hidden_part_path
from shardgen.store import db
from shardgen.store.hidden import read_header, read_turn

TRAINERS = ("specforge", "speculators")


def captured_rows(con) -> tuple[list[dict], list[dict]]:
    """export_hidden's rows whose winning part holds their states, each with its `states` file; and the headers of
    those files."""
    rows, held = [], {}
    for row in con.execute(db.prepared(con, "export_hidden")).fetch_df().to_dict("records"):
        path = hidden_part_path(Path(row["filename"]))
        if path not in held:
            held[path] = read_header(path) if path.exists() else {"gen_keys": []}
        if row["gen_key"] in held[path]["gen_keys"]:
            rows.append({**row, "states": path})
    return rows, [h for h in held.values() if h["gen_keys"]]


def write_hidden_exports(con, layout: Layout) -> dict:
    """Both exports, each built in a temp folder and renamed into place (a rerun replaces the old one whole); with
    nothing captured, neither folder is there. Returns the layers and dtype committed (each set seen) and per
    trainer the samples written and their bytes."""
    rows, headers = captured_rows(con)
    written: dict = {"layers": sorted({tuple(h["layers"]) for h in headers}),
                     "dtype": sorted({h["dtype"] for h in headers}), "exports": {}}
    for trainer in TRAINERS:
        target = layout.hidden_export(trainer)
        tmp = target.with_name(f".{trainer}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if rows:
            tmp.mkdir(parents=True)
            (_specforge if trainer == "specforge" else _speculators)(rows, tmp)
        shutil.rmtree(target, ignore_errors=True)
        if rows:
            tmp.rename(target)
            written["exports"][trainer] = {"samples": len(rows),
                                "bytes": sum(p.stat().st_size for p in target.rglob("*") if p.is_file())}
    return written


def _specforge(rows: list[dict], folder: Path) -> None:
    import torch

    for i, row in enumerate(rows):
        states = decoded(read_turn(row["states"], row["gen_key"]), torch.bfloat16)
        torch.save({"input_ids": torch.tensor(list(row["input_ids"]), dtype=torch.long),
                    "loss_mask": torch.tensor(list(row["loss_mask"]), dtype=torch.long),
                    "hidden_state": states[:, -1].unsqueeze(0).contiguous(),
                    "aux_hidden_state": states[:, :-1].flatten(1).unsqueeze(0).contiguous()},
                   folder / f"data_{i:08d}.ckpt")


def _speculators(rows: list[dict], folder: Path) -> None:
    import torch
    from datasets import Dataset
    from safetensors.torch import save_file

    Dataset.from_dict({"input_ids": [list(r["input_ids"]) for r in rows],
                       "loss_mask": [list(r["loss_mask"]) for r in rows],
                       "seq_len": [len(r["input_ids"]) for r in rows]}).with_format("torch").save_to_disk(str(folder))
    (folder / "hidden_states").mkdir()
    for i, row in enumerate(rows):
        stored = read_turn(row["states"], row["gen_key"])
        tensors = {"token_ids": torch.tensor(list(row["input_ids"]), dtype=torch.long),
                   "hidden_states": stored["states"]}
        if "scale" in stored:
            tensors["hidden_states_scales"] = stored["scale"]
        save_file(tensors, str(folder / "hidden_states" / f"hs_{i}.safetensors"))
