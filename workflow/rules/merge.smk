# Stage 4 and 5: the final dataset and training export, then the DuckDB report.
# On a cluster, merge is a cluster job (it streams the whole dataset); report is local (small queries).


rule merge:
    input:
        prompts=results("prompts", "prompts.parquet"),
        done=expand(results("generate", "shard-{shard}.done.json"), shard=SHARDS),
    output:
        dataset=results("dataset", "data.parquet"),
        train=results("dataset", "train.jsonl"),
        failed=results("merge", "failed.parquet"),
    log:
        results("logs", "merge.log"),
    benchmark:
        results("benchmarks", "merge.tsv")
    params:
        settings=GEN_SETTINGS,
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen merge --dataset {output.dataset:q} --train {output.train:q}"
        " --failed {output.failed:q} > {log:q} 2>&1"


rule report:
    localrule: True
    input:
        outputs=rules.merge.output,
        done=rules.merge.input.done,
    output:
        summary=results("report", "summary.json"),
        manifest=results("report", "manifest.json"),
        markdown=results("report", "report.md"),
        figures=report(
            expand(results("report", "figures", "{figure}.png"), figure=FIGURES),
            caption="../report/figures.rst",
            category="Generation",
        ),
    log:
        results("logs", "report.log"),
    benchmark:
        results("benchmarks", "report.tsv")
    params:
        out=output_dir,
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen report --out {params.out:q} --outputs {input.outputs:q}"
        " --done {input.done:q} > {log:q} 2>&1"
