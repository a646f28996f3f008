"""`shardgen retry` (and the workflow's retry_failed rule): generate again the failed prompts of every shard (or
those named) that failed fewer than `limit` times, and rewrite those shards' done files so merge and report follow.
A shard whose done file records no failure is left alone.

A retried shard's outputs are left as a generate job leaves them: Snakemake times a job's outputs by the oldest of
its output and its benchmark file, so the shard's benchmark (written when its generate job ran, before the retry
added parts to its folder) is brought to the done file's time; otherwise the next run would generate the shard
again instead of only merging and reporting."""

import os

from shardgen.config import Config
from shardgen.generate import checkpoint
from shardgen.generate.shard import generate_shard
from shardgen.layout import Layout

DEFAULT_LIMIT = 3  # failures of one prompt after which it is given up on


def retry_failed(config: Config, shards: list[int] | None = None, limit: int | None = None) -> dict:
    """{"retried_shards": {shard: {"generated", "failed"}}} for every shard retried."""
    limit = DEFAULT_LIMIT if limit is None else limit
    layout = Layout(config.results)
    retried = {}
    for shard in shards or layout.split_shards():
        done = checkpoint.ShardCheckpoint(layout, shard).done()
        if done is not None and done["failed"] == 0:
            continue
        record = generate_shard(config, shard, layout.done(shard), retry_limit=limit)
        if (benchmark := layout.benchmark("generate", shard)).exists():
            os.utime(benchmark)
        retried[shard] = {"generated": record["generated"], "failed": record["failed"]}
    return {"retried_shards": retried}
