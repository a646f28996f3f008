"""What the workflow must do while Snakemake parses it, before any rule runs: `prepare_run`, the one call
common.smk makes."""

from shardgen.config import Config
from shardgen.layout import Layout, shard_ids
from shardgen.store.locks import clear_stale_locks


def prepare_run(workflow, config: Config) -> None:
    """Snakemake takes its own directory lock right after the parse and refuses to start while a killed run's lock
    files remain, so they are cleared now, and only when no other run of this workflow is alive (store/locks.py).
    The resolved config is written and named in the environment every job's `shardgen` step inherits (on Slurm, a
    job's own parse names it again): the knobs that must not rerun anything reach the steps that way.
    Each shard's parts folder is made: it is the generate rule's input, and it must exist from the first parse on
    so that the rule's input list never changes."""
    config.export_for_jobs()
    layout = Layout(config.results)
    for shard in shard_ids(config.n_shards):
        layout.shard_dir(shard).mkdir(parents=True, exist_ok=True)
    clear_stale_locks(workflow)
