# Stage 3: one job per shard. Parts under generate/shard-NNN/ are deliberately not declared outputs
# (Snakemake deletes a failed job's outputs); the done file, written last, is.
# Always a cluster job: its GPUs come from the allocation (CUDA_VISIBLE_DEVICES), which the GPU lease respects.
# It keeps the profile's retries (an engine death resumes from the parts); the other rules fail once.


rule generate:
    input:
        shard=LAYOUT.split(SHARD),
        parts=shard_parts_dir,
    output:
        LAYOUT.done(SHARD),
    log:
        LAYOUT.log("generate", SHARD),
    benchmark:
        LAYOUT.benchmark("generate", SHARD)
    resources:
        gpu=CONFIG.engine.gpus_per_engine if CONFIG.gpus > 0 else 0,
    conda:
        BACKEND_ENV
    shell:
        "shardgen generate --shard {wildcards.shard} --done {output:q} > {log:q} 2>&1"


# Not part of `all`: `snakemake -f retry_failed && snakemake` generates failed prompts again (up to 3 failures
# each), rewrites the shards' done files, and so reruns merge and report.
rule retry_failed:
    input:
        [LAYOUT.done(s) for s in SHARDS],
    output:
        LAYOUT.retry,
    log:
        LAYOUT.log("retry_failed"),
    benchmark:
        LAYOUT.benchmark("retry_failed")
    params:
        limit=3,
    resources:
        gpu=CONFIG.engine.gpus_per_engine if CONFIG.gpus > 0 else 0,
    conda:
        BACKEND_ENV
    shell:
        "shardgen retry --limit {params.limit} --out {output:q} > {log:q} 2>&1"
