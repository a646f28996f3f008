# Stage 4 and 5: the final dataset and the exports for trainers, then the DuckDB report.
# On a cluster, merge is a cluster job (it streams the whole dataset); report is local (small queries).
from shardgen.merge.exports import EXPORTS


rule merge:
    input:
        prompts=LAYOUT.prompts,
        sources=LAYOUT.prompt_table("sources"),
        # what merge reads of a shard (its winning rows) the checkpoint answers; a done file says the shard is whole
        done=[LAYOUT.done(s) for s in SHARDS],
    output:
        dataset=LAYOUT.dataset,
        train=LAYOUT.train,
        failed=LAYOUT.failed,
        # the exports for trainers (shardgen/merge/exports.py), written by merge where Layout puts them
        exports=[LAYOUT.export(name) for name in EXPORTS],
        # with the hidden states the parts hold and the command that makes each trainer's export on demand
        # (shardgen/merge/hidden_exports.py): no export is a workflow output, the parts' states files are the copy
        exports_manifest=LAYOUT.exports_manifest,
    log:
        LAYOUT.log("merge"),
    benchmark:
        LAYOUT.benchmark("merge")
    params:
        settings=GEN_SETTINGS,
        exports=output_settings("exports"),  # what the text exports carry: a change rewrites them
        capture=output_settings("capture"),  # what the exports manifest says of the sidecar and counts
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen merge --prompts {input.prompts:q} --sources {input.sources:q} --dataset {output.dataset:q}"
        " --train {output.train:q} --failed {output.failed:q} > {log:q} 2>&1"


rule report:
    localrule: True
    input:
        outputs=rules.merge.output,
        done=rules.merge.input.done,
    output:
        summary=LAYOUT.report.summary,
        manifest=LAYOUT.report.manifest,
        markdown=LAYOUT.report.markdown,
        figures=report(
            [LAYOUT.report.figure(f) for f in FIGURES],
            caption="../report/figures.rst",
            category="Generation",
        ),
    log:
        LAYOUT.log("report"),
    benchmark:
        LAYOUT.benchmark("report")
    params:
        out=output_dir,
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen report --out {params.out:q} --outputs {input.outputs:q}"
        " --done {input.done:q} > {log:q} 2>&1"
