"""Before a shard's first request, with capture.hidden_states on: its layer ids fit the model (a layer past it is a
config error naming the key and the model's layers, not a failure per request) and the hidden states of its
remaining work fit the free space of the results folder, unless capture.hidden_states.allow_short_disk says to
start anyway. The forecast is the storage plan's (report/storage_hidden.py): bytes per position x positions, each
remaining conversation at its prompts row's work_tokens (every turn at its max_new_tokens: an upper bound). Each
shard checks its own work; shards side by side share the disk, which `shardgen forecast` plans as a whole."""

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from shardgen import ShardgenError
from shardgen.capture import HiddenCapture
from shardgen.engines.model_shape import ModelShape
from shardgen.layout import Layout

GIB = 2 ** 30


class ShortDiskError(ShardgenError, OSError):
    """The hidden states a shard is about to capture do not fit the free space of its results folder."""


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


def check(config, layout: Layout, shard: int, todo: list) -> None:
    """`todo`: the shard's TurnRequests (generate/shard.py), before its engine starts."""
    hidden = HiddenCapture.of(config)
    if hidden is None:
        return
    num_layers, hidden_size = ModelShape.from_dir(Path(config.model.path)).decoder_size()
    if num_layers is None or hidden_size is None:
        return  # the engine reads the model's own config (engines/transformers/hidden.py's num_layers) and checks there
    per_token = hidden.bytes_per_token(num_layers, hidden_size)  # a layer past the model: the config error
    conversations = {r.base_key for r in todo if hidden.wants(r.source)}
    if not conversations or config.capture.hidden_states.allow_short_disk:
        return
    split = pq.read_table(layout.split(shard), columns=["gen_key", "work_tokens"]).to_pydict()
    positions = sum(t for key, t in zip(split["gen_key"], split["work_tokens"]) if key in conversations)
    need, free = positions * per_token, free_bytes(layout.root)
    if need > free:
        raise ShortDiskError(
            f"shard {shard}: the hidden states of its remaining work need up to {need / GIB:,.1f} GiB ({need:,} bytes: "
            f"{positions:,} positions at every turn's max_new_tokens x {per_token:,} B for layers "
            f"{hidden.layer_ids(num_layers)} in {hidden.dtype}) but {layout.root} has {free / GIB:,.1f} GiB free "
            f"({free:,} bytes). Free space, capture fewer layers or float8_e4m3fn (capture.hidden_states), or set "
            "capture.hidden_states.allow_short_disk: true to start anyway")
