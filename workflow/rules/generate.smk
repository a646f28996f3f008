# Stage 3: one job per shard. Parts under generate/shard-NNN/ are deliberately not declared outputs
# (Snakemake deletes a failed job's outputs); the done file, written last, is.


rule generate:
    input:
        results("split", "shard-{shard}.parquet"),
    output:
        results("generate", "shard-{shard}.done.json"),
    log:
        results("logs", "generate", "shard-{shard}.log"),
    benchmark:
        results("benchmarks", "generate", "shard-{shard}.tsv")
    resources:
        gpu=config["engine"]["tp_size"] if config["gpus"] > 0 else 0,
    conda:
        BACKEND_ENV
    shell:
        "shardgen generate --shard {wildcards.shard} --done {output:q} > {log:q} 2>&1"
