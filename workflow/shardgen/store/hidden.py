"""The hidden states committed with a part (config capture.hidden_states): one safetensors file beside the part,
named by it (layout.hidden_part_path), written before the part through atomic.committed, so a part on disk always
has its states and a crash between the two leaves a sidecar without a part, which the part writer removes.

Why safetensors: the tensors stay tensors (bfloat16 and float8_e4m3fn, which parquet has no type for), a reader
maps them without copying and opens one turn without reading the others (speculators keeps its own hidden states
the same way), and it is a well-kept library the trainers already depend on. One file per part keeps the commit
one rename and the count of files the parts' own.

Tensors, per turn of the part that has states: `{gen_key}/states` ([positions, layers, hidden]: every position of
prompt_ids + output_ids, the layers in `layers` order) and, for fp8, `{gen_key}/scale` (float32 [positions, 1, 1]).
Header metadata (JSON values): `layers` (ids: output_hidden_states indices and capture.LAST_BEFORE_NORM),
`num_layers` (the model's decoder layers, L), `layer_set` (eagle3, dflash or explicit), `dtype`."""

import json
from pathlib import Path

from shardgen.store.atomic import committed


def held_bytes(turn: dict | None) -> int:
    """What one turn's encoded states (capture.HiddenCapture.encode's dict, or None) take in memory."""
    return sum(value.nbytes for name, value in (turn or {}).items() if name != "header")


def write_states(turns: dict[str, dict], path: Path) -> None:
    """`turns`: gen_key -> capture.HiddenCapture.encode's dict with its `header` (the layers, L, the layer set); one
    file, committed atomically."""
    from safetensors.torch import save_file

    headers = {json.dumps(t["header"], sort_keys=True) for t in turns.values()}
    if len(headers) != 1:
        raise ValueError(f"{path}: turns captured at different layers {sorted(headers)} cannot share a part")
    tensors = {f"{key}/{name}": value for key, t in turns.items() for name, value in t.items() if name != "header"}
    dtype = str(next(iter(turns.values()))["states"].dtype).removeprefix("torch.")
    metadata = {name: json.dumps(value) for name, value in json.loads(headers.pop()).items()}
    with committed(path) as tmp:
        save_file(tensors, str(tmp), metadata={**metadata, "dtype": dtype})


def read_header(path: Path) -> dict:
    """The file's metadata (layers as a list) and the set of gen_keys it holds, without reading a tensor."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        keys = {name.split("/")[0] for name in f.keys()}
    return {**{name: json.loads(value) for name, value in meta.items() if name != "dtype"}, "dtype": meta["dtype"],
            "gen_keys": keys}


def read_turn(path: Path, gen_key: str) -> dict:
    """One turn's stored tensors (`states`, and `scale` for fp8), read alone from the file."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        names = {f"{gen_key}/states", f"{gen_key}/scale"} & set(f.keys())
        if not names:
            raise KeyError(f"{path}: no hidden states for gen_key {gen_key}")
        return {n.split("/", 1)[1]: f.get_tensor(n) for n in names}
