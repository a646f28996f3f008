# Stage 1 and 2: normalized, deduplicated, tokenized prompts, then length-balanced shards.
# On a cluster, prompts is a cluster job (minutes and a few GB on 1M rows); split is local (seconds).


rule prompts:
    # The sources and the model are the config's entries (a source is more than a file: its format, fields and
    # sampling), which the command reads from the resolved config; their files are inputs so an edit reruns it.
    input:
        sources=source_files,
        model=Path(CONFIG.model.path, "config.json"),
        # The sampling a source leaves out is the model's: an edited generation config remakes the prompt set.
        generation_config=generation_config,
        # A chat template given as a file (model.chat_template): an edit remakes the prompt set.
        chat_template=lambda wildcards: [p] if (p := template_file(CONFIG.model.chat_template)) else [],
    output:
        prompts=LAYOUT.prompts,
        rejected=LAYOUT.prompt_table("rejected"),
        duplicates=LAYOUT.prompt_table("duplicates"),
        sources=LAYOUT.prompt_table("sources"),
    log:
        LAYOUT.log("prompts"),
    benchmark:
        LAYOUT.benchmark("prompts")
    threads: prompts_threads()
    params:
        out=output_dir,
        settings=GEN_SETTINGS,
    retries: 0  # a bad source or model fails the same way every time
    conda:
        BACKEND_ENV
    shell:
        # The stage writes its log itself and keeps the console for one line per source that lost rows.
        "shardgen prompts --out {params.out:q} --workers {threads} --log {log:q}"


rule split:
    localrule: True
    input:
        LAYOUT.prompts,
    output:
        [LAYOUT.split(s) for s in SHARDS],
    log:
        LAYOUT.log("split"),
    benchmark:
        LAYOUT.benchmark("split")
    params:
        out=output_dir,
        shards=len(SHARDS),
    retries: 0
    conda:
        BACKEND_ENV
    shell:
        "shardgen split --prompts {input:q} --out {params.out:q} > {log:q} 2>&1"
