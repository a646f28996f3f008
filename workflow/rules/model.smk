# The demo's tiny model: built here when model.path points at RESULTS/demo-model. Local: seconds of CPU.


rule demo_model:
    localrule: True
    input:
        corpus="config/demo/corpus.txt",
    output:
        results("demo-model", "config.json"),
    log:
        results("logs", "demo_model.log"),
    benchmark:
        results("benchmarks", "demo_model.tsv")
    params:
        out=output_dir,
        seed=CONFIG.seed,
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen demo-model --out {params.out:q} --corpus {input.corpus:q} --seed {params.seed} > {log:q} 2>&1"
