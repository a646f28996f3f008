"""What the workflow must do while Snakemake parses it, before any rule runs: `prepare_run`, the one call
common.smk makes."""

import sys

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.generate.checkpoint import ShardCheckpoint
from shardgen.layout import Layout, shard_ids
from shardgen.merge import uncaptured
from shardgen.store.locks import clear_stale_locks


def prepare_run(workflow, config: Config) -> None:
    """Snakemake takes its own directory lock right after the parse and refuses to start while a killed run's lock
    files remain, so they are cleared now, and only when no other run of this workflow is alive (store/locks.py).
    The resolved config is written and named in the environment every job's `shardgen` step inherits (on Slurm, a
    job's own parse names it again): the knobs that must not rerun anything reach the steps that way.
    Each shard's parts folder is made: it is the generate rule's input, and it must exist from the first parse on
    so that the rule's input list never changes. A results folder it cannot write (read-only, another user's) is
    said in one line naming it, as a config error is.
    A captured source with turns generated before capture was on is said in one line before anything runs
    (merge/uncaptured.py): the rerun exits 0 and its sidecar would otherwise lack them without a word.
    A finished shard whose parts changed since its done file (a part damaged in place keeps its folder's time) has
    its folder marked, so that the run generates it again, and is said in one line (checkpoint.mark_changed)."""
    layout = Layout(config.results)
    try:
        config.export_for_jobs()
        for shard_id in shard_ids(config.n_shards):
            layout.shard_dir(shard_id).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ResultsNotWritable(
            f"results_dir {config.results}: cannot write there ({err.strerror}"
            f"{f': {err.filename}' if err.filename else ''}); a run writes its steps' outputs there: set "
            "results_dir to a writable folder or make this one writable (`shardgen --results DIR status` and "
            "`query` only read a finished run)") from err
    clear_stale_locks(workflow, config.results)
    if not workflow.is_main_process:
        return
    if note := uncaptured.at_start(config, layout):
        print(f"shardgen: {note}", file=sys.stderr)
    for shard in range(config.n_shards):
        if changed := ShardCheckpoint(layout, shard).mark_changed():
            print(f"shardgen: shard {shard}: {', '.join(changed)} changed since the shard's done file (a copy back, "
                  "a damaged disk): the shard is generated again, a part that cannot be read quarantined and its rows "
                  "generated again", file=sys.stderr)


class ResultsNotWritable(ShardgenError, OSError):
    """The results folder refuses a write before any rule runs."""
