"""The hidden-state exports (config capture.hidden_states), built on demand by `shardgen export-hidden`, one trainer
at a time, each a folder the trainer's own offline code reads unmodified: one sample per turns.jsonl row of the
merged dataset whose winning part holds its states (store/hidden.py), read one turn at a time from those parts.

Why on demand, and not written by merge: the committed parts' states files are the one copy, where exactly-once is
kept (a killed shard, a reset, a rerun: the part writer's rules), and the trainers' formats cannot share their bytes:
SpecForge's torch.save .ckpt holds layer L after the final norm and the auxiliary layers flattened, speculators'
safetensors the layer before that norm, stacked [seq, layers, H], fp8 kept as fp8. Three full copies beside the parts
took 2.6x the disk of the states; an export written where and when the trainer runs costs its bytes only there.
merge records per trainer whether its export can be made from the captured layers, or why not, and the command.

The layers' roles (capture.py): the auxiliary layers are the output_hidden_states indices below L, ascending; the
last is L (after the final norm) for SpecForge's EAGLE-3 and LAST_BEFORE_NORM (the final norm's input) for
speculators, each what that trainer's own data generation stores.

- `specforge`: SpecForge 0.2.0's offline EAGLE-3 feature files `data_NNNNNNNN.ckpt` (what
  scripts/prepare_hidden_states.py writes; read by runtime/data_plane/offline_reader.py and
  algorithms/eagle3/data.py::normalize_offline_sample): torch.save of `input_ids`, `loss_mask` ([seq] int64),
  `hidden_state` ([1, seq, H]: index L) and `aux_hidden_state` ([1, seq, k*H]), bfloat16.
- `specforge_dflash`: SpecForge 0.2.0's offline DFlash feature files
  (algorithms/common/dflash_family_data.py::normalize_offline_sample): `input_ids`, `loss_mask`, `hidden_states`
  ([seq, k*H]: the auxiliary layers; no last), bfloat16. A sample without two consecutive supervised tokens is left
  out: SpecForge's DFlash refuses it (data/loss_mask.py::has_consecutive_supervised_tokens) and stops training.
- `speculators`: speculators 0.9.0's offline layout (train/data.py::ArrowDataset): a `datasets` folder of
  `input_ids`, `loss_mask`, `seq_len`, and `hidden_states/hs_{i}.safetensors` with `token_ids` and `hidden_states`
  ([seq, k+1, H]: the auxiliary layers, then LAST_BEFORE_NORM, which its trainer normalizes with its own
  verifier_norm), bfloat16; under fp8, float8_e4m3fn with `hidden_states_scales` ([seq, 1, 1]), which only
  speculators' `fp8` backend (hs_connectors.transfer.FP8Transfer) dequantizes: its default `file` backend hands the
  raw fp8 codes to the trainer.

Each export is written to DIR.tmp and renamed onto DIR (a rerun replaces it whole; an interrupted one leaves nothing
under DIR), with DIR/export.json saying what it holds, what it left out and why, and the command that trains on it."""

import glob
import json
import shlex
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from shardgen import ShardgenError
from shardgen.capture import LAST_BEFORE_NORM
from shardgen.layout import Layout, hidden_part_path
from shardgen.merge import hidden_writers
from shardgen.store.atomic import write_text
from shardgen.store.hidden import read_header, read_turn

# store.db (duckdb) is imported where it is used: the CLI imports this module for TRAINERS, and duckdb would slow
# every command's start
TRAINERS = ("specforge", "specforge_dflash", "speculators")
RECORD = "export.json"  # in every export folder: what it holds and how to train on it
SPECFORGE_CONFIG = "specforge.yaml"  # in a SpecForge export: the run config its `specforge train` reads
ROWS_PER_BATCH = 256  # turns fetched from DuckDB at a time: memory holds one batch of ids, never the dataset
MEMORY_LIMIT = "1GB"  # DuckDB's, as merge's: the ordered rows spill to disk beyond it
NO_STATES = ("no hidden states committed for the turn (generated while capture was off for its source, or before "
             "it was turned on)")


class ExportError(ShardgenError, RuntimeError):
    pass


@dataclass
class Captured:
    """What the merged dataset's turns have of hidden states: its turns, each captured turn's states file, and the
    headers of those files."""
    turns: int = 0
    states: dict[str, Path] = field(default_factory=dict)
    headers: list[dict] = field(default_factory=list)

    def header(self) -> dict | None:
        """The one setting every captured turn was stored at (None: none captured); turns captured at different
        layers or dtypes cannot make one export."""
        kinds = {json.dumps({k: h[k] for k in ("layers", "num_layers", "layer_set", "dtype")}) for h in self.headers}
        if len(kinds) > 1:
            raise ExportError(f"hidden states were captured at different settings {sorted(kinds)}: reset the shards "
                              "captured under the old setting (shardgen reset SHARD) and generate them again, then "
                              "merge")
        return self.headers[0] if self.headers else None


def captured(con) -> Captured:
    """The dataset's turns (export_hidden's rows, con: after merge or checkpoint.connect) and, per captured turn, the
    states file of its winning part; each file's header read once, no tensor read."""
    from shardgen.store import db

    found, held = Captured(), {}
    for gen_key, filename in con.execute(f"SELECT gen_key, filename FROM ({db.prepared(con, 'export_hidden')})"
                                         ).fetchall():
        found.turns += 1
        path = hidden_part_path(Path(filename))
        if path not in held:
            held[path] = read_header(path) if path.exists() else {"gen_keys": set()}
        if gen_key in held[path]["gen_keys"]:
            found.states[gen_key] = path
    used = set(found.states.values())
    found.headers = [h for path, h in held.items() if path in used]
    return found


def roles(header: dict) -> dict:
    """Positions in the stored layer axis: `aux` (ids below L, ascending), `last` (L), `before_norm`; and the ids."""
    layers, top = header["layers"], header["num_layers"]
    aux = [k for k, i in enumerate(layers) if i != LAST_BEFORE_NORM and i < top]
    return {"aux": aux, "aux_ids": [layers[k] for k in aux], "last": layers.index(top) if top in layers else None,
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


def export_bytes_per_token(trainer: str, role: dict, dtype: str, hidden_size: int) -> int:
    """What one position costs in `trainer`'s export: its layers' values (SpecForge's in bfloat16, speculators' as
    stored: fp8 with its float32 scale) and its int64 ids (SpecForge: input_ids and loss_mask; speculators: the
    token_ids beside the states and the dataset's input_ids and loss_mask)."""
    if trainer == "speculators":
        fp8 = dtype == "float8_e4m3fn"
        return (len(role["aux"]) + 1) * hidden_size * (1 if fp8 else 2) + 4 * fp8 + 3 * 8
    layers = len(role["aux"]) + (trainer == "specforge")
    return layers * hidden_size * 2 + 2 * 8


def speculator_type(header: dict) -> str:
    """The speculators draft the captured set is for: dflash's set trains a DFlash draft, the others EAGLE-3."""
    return "dflash" if header["layer_set"] == "dflash" else "eagle3"


def model_dir(config) -> str:
    """The target's folder as a trainer is told it: absolute, since it trains from wherever it runs."""
    return str(Path(config.model.path).absolute())


def train(trainer: str, header: dict, folder: Path, model: str, context_length: int) -> dict:
    """The command that trains on the export in `folder`, the flags it needs and why, and what else to check."""
    role, folder = roles(header), Path(folder).absolute()
    if trainer == "speculators":
        flags = {"--speculator-type": speculator_type(header),
                 # speculators' default is [2, L//2, L-3]: three layers, duplicated on a small model
                 "--target-layer-ids": " ".join(map(str, role["aux_ids"])),
                 "--total-seq-len": str(context_length)}
        if header["dtype"] == "float8_e4m3fn":  # the default `file` backend returns the raw fp8 codes
            flags["--hidden-states-backend"] = "fp8"
        words = ["speculators", "train", "--verifier-name-or-path", shlex.quote(model), "--data-path",
                 shlex.quote(str(folder))] + [w for flag, value in flags.items() for w in (flag, value)]
        return {"command": " ".join(words), "flags": flags,
                "notes": ["--target-layer-ids: the auxiliary layers this export holds, in the order stored; "
                          "speculators defaults to three ([2, L//2, L-3]) and its draft reads as many",
                          "--total-seq-len: model.context_length (longer rows are truncated)"]
                         + (["--hidden-states-backend fp8: the states are float8_e4m3fn with a scale per position; "
                             "speculators' default `file` backend returns the raw fp8 codes, its `fp8` backend "
                             "dequantizes them"] if "--hidden-states-backend" in flags else [])}
    strategy = "eagle3" if trainer == "specforge" else "dflash"
    run = {"model": {"target_model_path": model},
           "data": {"hidden_states_path": str(folder), "max_length": context_length},
           "training": {"strategy": strategy}}
    notes = [f"{folder / SPECFORGE_CONFIG}: the run config (data.max_length is model.context_length: longer rows are "
             "truncated); add your training settings to it, or give them as section.field=value after the command"]
    if trainer == "specforge_dflash" and role["aux_ids"] != [header["num_layers"] // 2 + 1]:
        notes.append(f"SpecForge's auto-generated DFlash draft reads one target layer, layer output L//2 (index "
                     f"{header['num_layers'] // 2 + 1}); these are indices {role['aux_ids']}: give "
                     "model.draft_model_config a draft whose dflash_config.target_layer_ids are "
                     f"{[i - 1 for i in role['aux_ids']]} (layer outputs: the indices less 1)")
    return {"command": f"specforge train --config {shlex.quote(str(folder / SPECFORGE_CONFIG))}", "config": run,
            "notes": notes}


def record(con, layout: Layout) -> dict:
    """merge's record of the hidden states (after its exports, on its connection): the dataset's turns with and
    without states, the parts' states files (every one on disk: the bytes they take), the one setting the captured
    turns were stored at (`header`), or why no export can be made of them (`unusable`)."""
    found = captured(con)
    files = [Path(p) for p in glob.glob(layout.hidden_parts_glob)]
    try:
        header, unusable = found.header(), None
    except ExportError as err:
        header, unusable = None, str(err)
    return {"turns": found.turns, "turns_captured": len(found.states),
            "turns_without_states": found.turns - len(found.states),
            "parts": {"files": len(files), "bytes": sum(p.stat().st_size for p in files)},
            "header": header and {k: header[k] for k in ("layers", "num_layers", "layer_set", "dtype")},
            "unusable": unusable or (None if header else "no turn of the dataset has hidden states")}


def exportable(config, layout: Layout, merged: dict) -> dict:
    """From merge's record: per trainer the command that makes its export and the one that trains on it (`exports`),
    or why its export cannot be made (`skipped`): every trainer is in one of the two."""
    header, exports, skipped = merged["header"], {}, {}
    for trainer in TRAINERS:
        if why := merged["unusable"] or missing(trainer, roles(header)):
            skipped[trainer] = why
            continue
        folder = layout.hidden_export(trainer)
        exports[trainer] = {"make": f"shardgen export-hidden --trainer {trainer}", "folder": str(folder),
                            "train": train(trainer, header, folder, model_dir(config), config.model.context_length)}
    return {"exports": exports, "skipped": skipped}


def remove_exports(layout: Layout) -> None:
    """An export an earlier run wrote under the results folder is of the dataset as it was: merge removes it."""
    shutil.rmtree(layout.hidden_exports_dir, ignore_errors=True)


def _rows(con):
    """export_hidden's rows, ordered by id, fetched a batch at a time."""
    from shardgen.store import db

    reader = con.sql(db.prepared(con, "export_hidden")).to_arrow_reader(ROWS_PER_BATCH)
    for batch in reader:
        yield from batch.to_pylist()


def _replaceable(out: Path) -> None:
    """`out` may be replaced whole only when it is an export (or absent, or empty): never a user's other folder."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / RECORD).is_file())):
        raise ExportError(f"{out} exists and is no hidden-state export (no {RECORD} in it): export-hidden replaces "
                          "its --out whole, so give a new folder")


def export(config, layout: Layout, trainer: str, out: Path | None = None) -> dict:
    """`trainer`'s export of the merged dataset into `out` (default: results/exports/hidden/<trainer>), written to
    out.tmp and renamed onto it; returns (and writes as out/export.json) what it holds."""
    from shardgen.generate import checkpoint
    from shardgen.store import db

    out = Path(out) if out else layout.hidden_export(trainer)
    if not layout.dataset.is_file():
        raise ExportError(f"no merged dataset at {layout.dataset}: run the workflow (or `shardgen merge`) first")
    _replaceable(out)
    con = checkpoint.connect(layout, memory_limit=MEMORY_LIMIT)
    spill = out.with_name(f"{out.name}.spill")
    con.execute(f"SET temp_directory = {db.quote(spill)}")
    found = captured(con)
    header = found.header()
    if header is None:
        raise ExportError(f"no turn of the dataset {layout.dataset} has hidden states: turn capture.hidden_states on "
                          "and generate (turns generated without it keep none: shardgen reset SHARD regenerates a "
                          "shard)")
    role = roles(header)
    if why := missing(trainer, role):
        raise ExportError(f"no {trainer} export from the layers captured ({header['layers']}): {why}; capture "
                          "another layer set (capture.hidden_states.layers) and regenerate (shardgen reset SHARD)")
    tmp = out.with_name(f"{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        result = {"trainer": trainer, "folder": str(out.absolute()), **_write(con, found, trainer, tmp, role, header),
                  "layers": header["layers"], "num_layers": header["num_layers"], "layer_set": header["layer_set"],
                  "captured_dtype": header["dtype"], "model": model_dir(config),
                  "model_hash": config.target_model.fingerprint["model"],
                  "train": train(trainer, header, out, model_dir(config), config.model.context_length),
                  "written_by": f"shardgen export-hidden --trainer {trainer} --out {shlex.quote(str(out))}"}
        if trainer != "speculators":
            import yaml

            write_text(yaml.safe_dump(result["train"]["config"], sort_keys=False), tmp / SPECFORGE_CONFIG)
        result["bytes"] = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())  # this record aside
        write_text(json.dumps(result, indent=1), tmp / RECORD)
    except BaseException:  # interrupted (Ctrl-C) or failed: no half export left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    _replace(tmp, out)
    return result


def _write(con, found: Captured, trainer: str, folder: Path, role: dict, header: dict) -> dict:
    writer = hidden_writers.writer(trainer, folder, role, header["dtype"])
    samples, left_out = 0, Counter[str]()
    for row in _rows(con):
        path = found.states.get(row["gen_key"])
        why = NO_STATES if path is None else writer.refuses(row)
        if why or path is None:
            left_out[why] += 1
            continue
        writer.add(samples, row, read_turn(path, row["gen_key"]))
        samples += 1
    writer.close()
    return {"samples": samples, "dtype": writer.dtype, "left_out": dict(left_out)}


def _replace(tmp: Path, out: Path) -> None:
    """tmp onto out: the old export moved aside first, so out is always whole, then removed."""
    old = out.with_name(f"{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
