"""The hidden-state exports (config capture.hidden_states), each a folder a trainer's own offline code reads
unmodified: one sample per turns.jsonl row whose turn was captured (its input_ids and loss_mask, the states at
every position), read from the turn's winning part (store/hidden.py), so merge picks the winner's states.

The layers' roles (capture.py): the auxiliary layers are the output_hidden_states indices below L, in the order
captured; the last is L (after the final norm) for SpecForge and LAST_BEFORE_NORM (the final norm's input) for
speculators, each what that trainer's own data generation stores.

- `exports/hidden/specforge/data_NNNNNNNN.ckpt`: SpecForge 0.2.0's offline EAGLE-3 feature file (what
  scripts/prepare_hidden_states.py writes; read by runtime/data_plane/offline_reader.py and
  algorithms/eagle3/data.py::normalize_offline_sample): torch.save of `input_ids`, `loss_mask` ([seq] int64),
  `hidden_state` ([1, seq, H]: index L, what SGLang's logits processor is given and SpecForge's TargetHead projects
  without a norm) and `aux_hidden_state` ([1, seq, k*H]), bfloat16.
- `exports/hidden/specforge_dflash/data_NNNNNNNN.ckpt`: SpecForge 0.2.0's offline DFlash feature file
  (data/preprocessing.py::process_offline_dflash_sample): `input_ids`, `loss_mask`, `hidden_states` ([seq, k*H]:
  the auxiliary layers, the draft's target layers; no last), bfloat16.
- `exports/hidden/speculators/`: speculators 0.9.0's offline layout (train/data.py::ArrowDataset): a `datasets`
  folder of `input_ids`, `loss_mask`, `seq_len`, and `hidden_states/hs_{i}.safetensors` with `token_ids` and
  `hidden_states` ([seq, k+1, H]: the auxiliary layers, then LAST_BEFORE_NORM, which its trainer normalizes with
  its own verifier_norm), bfloat16; under fp8, float8_e4m3fn with `hidden_states_scales` ([seq, 1, 1],
  hs_connectors' FP8Transfer layout, read with that transfer).

Which are written: eagle3's layer set SpecForge's EAGLE-3 and speculators', dflash's SpecForge's DFlash and
speculators', an explicit list every one; one whose layers were not captured is skipped, the manifest says why."""

import shutil
from pathlib import Path

from shardgen.capture import LAST_BEFORE_NORM, decoded
from shardgen.layout import Layout, hidden_part_path
from shardgen.store import db
from shardgen.store.hidden import read_header, read_turn

TRAINERS = {"eagle3": ("specforge", "speculators"), "dflash": ("specforge_dflash", "speculators"),
            "explicit": ("specforge", "specforge_dflash", "speculators")}


def captured_rows(con) -> tuple[list[dict], list[dict]]:
    """export_hidden's rows whose winning part holds their states, each with its `states` file; and the headers of
    those files."""
    rows, held = [], {}
    for row in con.execute(db.prepared(con, "export_hidden")).fetch_df().to_dict("records"):
        path = hidden_part_path(Path(row["filename"]))
        if path not in held:
            held[path] = read_header(path) if path.exists() else {"gen_keys": set()}
        if row["gen_key"] in held[path]["gen_keys"]:
            rows.append({**row, "states": path})
    return rows, [h for h in held.values() if h["gen_keys"]]


def roles(header: dict) -> dict:
    """Positions in the stored layer axis: `aux` (ids below L, in order), `last` (L), `before_norm`."""
    layers, top = header["layers"], header["num_layers"]
    return {"aux": [k for k, i in enumerate(layers) if i != LAST_BEFORE_NORM and i < top],
            "last": layers.index(top) if top in layers else None,
            "before_norm": layers.index(LAST_BEFORE_NORM) if LAST_BEFORE_NORM in layers else None}


def missing(trainer: str, role: dict) -> str | None:
    """Why `trainer`'s export cannot be written from these layers; None when it can."""
    if not role["aux"]:
        return "no auxiliary layer (an output_hidden_states index below L) was captured"
    if trainer == "specforge" and role["last"] is None:
        return "its last layer, L (after the final norm), was not captured"
    if trainer == "speculators" and role["before_norm"] is None:
        return f"its last layer, {LAST_BEFORE_NORM}, was not captured"
    return None


def no_hidden_exports(layout: Layout) -> dict:
    """Hidden states not captured: no export (one an earlier run wrote is removed), and the record that says so."""
    shutil.rmtree(layout.hidden_exports_dir, ignore_errors=True)
    return {"layers": [], "dtype": [], "exports": {}, "skipped": {}}


def write_hidden_exports(con, layout: Layout) -> dict:
    """The exports of the layer set, each built in a temp folder and renamed into place (a rerun replaces the old one
    whole); with nothing captured, no folder is there. Returns the layers and dtype committed, per trainer written
    its samples and bytes, and per trainer skipped why."""
    rows, headers = captured_rows(con)
    kinds = {(tuple(h["layers"]), h["num_layers"], h["layer_set"], h["dtype"]) for h in headers}
    if len(kinds) > 1:
        raise ValueError(f"hidden states were captured at different settings {sorted(map(str, kinds))}: reset the "
                         "shards captured under the old setting (shardgen reset) and generate them again")
    written: dict = {"layers": [h["layers"] for h in headers[:1]], "dtype": [h["dtype"] for h in headers[:1]],
                     "exports": {}, "skipped": {}}
    wanted = TRAINERS[headers[0]["layer_set"]] if headers else ()
    role = roles(headers[0]) if headers else {}
    temps = {trainer: layout.hidden_export(trainer).with_name(f".{trainer}.tmp") for trainer in WRITERS}
    writing = []
    for trainer, tmp in temps.items():
        shutil.rmtree(tmp, ignore_errors=True)
        why = missing(trainer, role) if trainer in wanted else None
        if rows and trainer in wanted and why is None:
            tmp.mkdir(parents=True)
            writing.append(trainer)
        elif why:
            written["skipped"][trainer] = why
    if writing:
        _write(rows, role, {trainer: temps[trainer] for trainer in writing})
    for trainer, tmp in temps.items():
        target = layout.hidden_export(trainer)
        shutil.rmtree(target, ignore_errors=True)
        if trainer in writing:
            tmp.rename(target)
            written["exports"][trainer] = {"samples": len(rows),
                                           "bytes": sum(p.stat().st_size for p in target.rglob("*") if p.is_file())}
    return written


def _ids(row: dict, name: str):
    import torch

    return torch.tensor(list(row[name]), dtype=torch.long)


def _write(rows: list[dict], role: dict, folders: dict[str, Path]) -> None:
    """Every trainer's export from one read of each turn's stored states."""
    import torch

    if "speculators" in folders:
        _speculators_dataset(rows, folders["speculators"])
    for i, row in enumerate(rows):
        stored = read_turn(row["states"], row["gen_key"])
        states = decoded(stored, torch.bfloat16) if {"specforge", "specforge_dflash"} & folders.keys() else None
        for trainer, folder in folders.items():
            WRITERS[trainer](i, row, stored, states, role, folder)


def _specforge(i: int, row: dict, stored: dict, states, role: dict, folder: Path) -> None:
    import torch

    torch.save({"input_ids": _ids(row, "input_ids"), "loss_mask": _ids(row, "loss_mask"),
                "hidden_state": states[:, role["last"]].unsqueeze(0).contiguous(),
                "aux_hidden_state": states[:, role["aux"]].flatten(1).unsqueeze(0).contiguous()},
               folder / f"data_{i:08d}.ckpt")


def _specforge_dflash(i: int, row: dict, stored: dict, states, role: dict, folder: Path) -> None:
    import torch

    torch.save({"input_ids": _ids(row, "input_ids"), "loss_mask": _ids(row, "loss_mask"),
                "hidden_states": states[:, role["aux"]].flatten(1).contiguous()}, folder / f"data_{i:08d}.ckpt")


def _speculators_dataset(rows: list[dict], folder: Path) -> None:
    from datasets import Dataset

    Dataset.from_dict({"input_ids": [list(r["input_ids"]) for r in rows],
                       "loss_mask": [list(r["loss_mask"]) for r in rows],
                       "seq_len": [len(r["input_ids"]) for r in rows]}).with_format("torch").save_to_disk(str(folder))
    (folder / "hidden_states").mkdir()


def _speculators(i: int, row: dict, stored: dict, states, role: dict, folder: Path) -> None:
    from safetensors.torch import save_file

    # fp8 values keep their per-position scale: it is the amax over every captured layer, a subset's included
    tensors = {"token_ids": _ids(row, "input_ids"),
               "hidden_states": stored["states"][:, role["aux"] + [role["before_norm"]]].contiguous()}
    if "scale" in stored:
        tensors["hidden_states_scales"] = stored["scale"]
    save_file(tensors, str(folder / "hidden_states" / f"hs_{i}.safetensors"))


WRITERS = {"specforge": _specforge, "specforge_dflash": _specforge_dflash, "speculators": _speculators}
