# The demo's tiny model: built here when model.path points at RESULTS/demo-model. Local: seconds of CPU.


rule demo_model:
    localrule: True
    input:
        corpus="config/demo/corpus.txt",
    output:
        LAYOUT.demo_model_dir / "config.json",
        LAYOUT.demo_model_dir / GENERATION_CONFIG,
    log:
        LAYOUT.log("demo_model"),
    benchmark:
        LAYOUT.benchmark("demo_model")
    params:
        out=output_dir,
        seed=CONFIG.seed,
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen demo-model --out {params.out:q} --corpus {input.corpus:q} --seed {params.seed} > {log:q} 2>&1"
