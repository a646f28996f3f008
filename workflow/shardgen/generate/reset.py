"""`shardgen reset N`: really start a shard over; its parts are moved aside, never deleted."""

from pathlib import Path

from shardgen import ShardgenError
from shardgen.config import DEFAULT_CONFIG
from shardgen.generate.checkpoint import ShardCheckpoint
from shardgen.layout import Layout


def reset_shard(layout: Layout, shard: int) -> Path | None:
    if shard not in (shards := layout.split_shards()):
        have = f"shards {shards[0]}-{shards[-1]}" if shards else f"no split shards yet in {layout.split_dir}"
        raise ShardgenError(f"no shard {shard} in {layout.root}: this run has {have}")
    return ShardCheckpoint(layout, shard).reset()


def rerun_hint(layout: Layout, shard: int, config: Path | None, given_results: bool) -> str:
    """The snakemake command that reruns the shard. It must name the run's config, or its targets (the results
    folder, the shards) differ; --results alone names a folder, not the config that wrote it."""
    known = config and not (given_results and config == DEFAULT_CONFIG)
    configfile = f"--configfile {config}" if known else "--configfile <the run's config file>"
    return f"now run: snakemake {configfile} -R {layout.done(shard)}"
