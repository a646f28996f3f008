import hashlib
import json
import sys
from pathlib import Path

from snakemake.utils import available_cpu_count

from shardgen import ShardgenError
from shardgen.config import Config
from shardgen.engines.registry import BACKENDS
from shardgen.report.figures import FIGURES
from shardgen.layout import SHARD_REGEX, SHARD_WILDCARD as SHARD, Layout, shard_ids
from shardgen.run_start import prepare_run
from shardgen.prompts.sources import check_readable
from shardgen.model.target import check_model_folder, template_file
from shardgen.sampling import GENERATION_CONFIG


# Snakemake's config schema validation, done by Config.from_dict (one path for the workflow and the CLI) against
# ../schemas/config.schema.yaml: defaults filled, errors naming the key and the closest valid one. Sources and the
# model folder are checked at every parse, not only when prompts runs: a wrong path is an error even when results
# exist. A config error is the user's to fix: its message alone, not a traceback into this file.
try:
    CONFIG = Config.from_dict(config)
    LAYOUT = Layout(CONFIG.results)
    # Snakemake's --lint checks the workflow, not this machine (it is the one mode that skips the envvars check):
    # the files of the config it reads need not exist there.
    if workflow.check_envvars:
        check_readable(CONFIG.sources)
        check_model_folder(CONFIG.model, LAYOUT.demo_model_dir)
    # The work that cannot wait for a rule: a killed run's Snakemake locks cleared before Snakemake takes its own,
    # the resolved config handed to every job, the shard folders the generate rule reads (run_start.prepare_run).
    prepare_run(workflow, CONFIG)
except ShardgenError as error:
    sys.exit(f"shardgen: {error}")
SHARDS = shard_ids(CONFIG.n_shards)


wildcard_constraints:
    shard=SHARD_REGEX,


def source_files(wildcards):
    return [s.path for s in CONFIG.sources if s.path is not None]


def output_settings(*keys):
    """Settings that change outputs, as a rerun trigger: a change reruns the rule and what follows. A digest, not
    the settings' text: Snakemake formats a string param, so a `{word}` a user wrote (a Jinja template's
    `{{ bos_token }}`, a system prompt) would stop the workflow; the steps read the settings from the resolved
    config."""
    return hashlib.sha256(json.dumps({k: CONFIG.raw[k] for k in keys}, sort_keys=True).encode()).hexdigest()


# What every gen_key depends on. merge carries it too: after a failed prompts job (whose outputs Snakemake deletes)
# the dataset and report still exist, and only a trigger on merge itself makes Snakemake rebuild the chain.
GEN_SETTINGS = output_settings("model", "defaults", "sources")


def generation_config(wildcards):
    """The model's generation config where it has one. The demo model's is built with it (rule demo_model), so it is
    an input from the first parse on: an input that appeared only once the file existed made Snakemake rerun a
    finished demo (its set of input files had changed)."""
    path = Path(CONFIG.model.path, GENERATION_CONFIG)
    built_here = Path(CONFIG.model.path).resolve() == LAYOUT.demo_model_dir.resolve()
    return [str(path)] if built_here or path.is_file() else []


def shard_parts_dir(wildcards):
    """The shard's parts folder as an input: deleting or quarantining a part touches it, so it is newer than the
    done file and a plain run regenerates that shard's lost rows (prepare_run made it)."""
    return str(LAYOUT.shard_dir(int(wildcards.shard)))


def prompts_threads():
    """prompts.workers, else the cores this snakemake was given (it caps threads at --cores; `--jobs unlimited`, a
    local run's alias for --cores, means every core). A snakemake that submits to Slurm has no --cores (reading
    workflow.cores raises there) and the rule's threads do not size the job: profiles/slurm's cpus_per_task does,
    and the job's own snakemake (--cores all) gives the rule those cores."""
    cores = workflow.resource_settings.cores
    return CONFIG.prompts.workers or (available_cpu_count() if cores == sys.maxsize else cores) or 1


def output_dir(wildcards, output):
    return str(Path(output[0]).parent)


# One conda env per backend (its registration names it), used by every rule when run with --sdm conda (envs/,
# relative to this file).
BACKEND_ENV = f"../../envs/{BACKENDS[CONFIG.engine.backend].env}"
