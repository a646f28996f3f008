# shardgen: instruction datasets -> length-balanced shards -> one SGLang Engine per GPU -> dataset + DuckDB report.
# Usage: README.md. Configuration: config/config.yaml (schema: workflow/schemas/config.schema.yaml).
import sys
import time

from snakemake.utils import min_version

from shardgen.run_end import run_end_lines

min_version("9.19")
RUN_STARTED = time.time()


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/merge.smk"


rule all:
    input:
        rules.report.output,


onsuccess:
    for line in run_end_lines(CONFIG, RUN_STARTED):
        print(f"shardgen: {line}", file=sys.stderr)
