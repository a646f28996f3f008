# shardgen: instruction datasets -> length-balanced shards -> one SGLang Engine per GPU -> dataset + DuckDB report.
# Usage: README.md. Configuration: config/config.yaml (schema: workflow/schemas/config.schema.yaml).
from snakemake.utils import min_version

min_version("9.19")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/generate.smk"
include: "workflow/rules/merge.smk"


rule all:
    input:
        rules.report.output,
