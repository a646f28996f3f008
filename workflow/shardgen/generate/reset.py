"""`shardgen reset N`: really start a shard over; its parts are moved aside, never deleted."""

import shutil
from datetime import datetime, timezone
from pathlib import Path

from shardgen import ShardgenError
from shardgen.layout import Layout


def reset_shard(layout: Layout, shard: int) -> Path | None:
    if shard not in (shards := layout.split_shards()):
        have = f"shards {shards[0]}-{shards[-1]}" if shards else f"no split shards yet in {layout.split_dir}"
        raise ShardgenError(f"no shard {shard} in {layout.root}: this run has {have}")
    shard_dir = layout.shard_dir(shard)
    layout.done(shard).unlink(missing_ok=True)
    if not shard_dir.exists():
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = layout.reset_dir / f"{shard_dir.name}-{stamp}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(shard_dir, target)
    return target
