#!/usr/bin/env bash
# Capture and audit on one GPU (one lease, one kernel cache), behind benchmarks/results/*-capture-*:
#   setsid bash benchmarks/sessions/capture.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/sessions/capture.sh collect                                      (copies what exists to $OUT)
# all: the nh8b model (dummy weights, the shipped engine section plus load_format dummy and fa3), then
#   cost: benchmarks/capture/capture_cost.py on 512 chat prompts x 256 tokens: capture off and at k 0/20/64 on one
#     engine, and the stop-token and prefill re-scoring checks (the cold start: it fills the kernel cache);
#   run: the workflow (`snakemake`) with `capture: {logprobs: true, top_k: 20}` on 300 prompts at temperature 1
#     (so the audit's "against generation time" compares like with like whatever SGLang does with T on a
#     prefill's logprobs; the cost step's re-scoring check measures that): the parts, the sidecar and the report's
#     storage plan from a real SGLang run;
#   audit: `shardgen audit` of that run: its own settings, a bfloat16 SSM state, an fp8 KV cache.
# demo-audit (after all, or alone on a fresh machine): the same audit on the demo model, whose distributions are
#   real (dummy weights give a uniform one, so `all`'s audit cannot see a numerics change), plus the CPU reference.
# Each result is written under $RES as soon as it exists; a step that fails leaves its log and the next one runs.
set -uo pipefail
source benchmarks/sessions/driver.sh
W=${CAPTURE_DIR:-/root/capture}
case "$1" in
  all)
    step setup
    python3 .gpu/kit/make_model.py /root/model --only nh8b --round-trip > /dev/null
    python3 benchmarks/engine/variable_length.py make --out $W/cost --model /root/model/nh8b --engine shipped \
      --mix chat:512:256 > /dev/null
    python3 benchmarks/engine/variable_length.py make --out $W/run --model /root/model/nh8b --engine shipped \
      --mix chat:240:256,code:60:512 > /dev/null
    python3 - "$W" <<'EOF'
import sys, yaml
w = sys.argv[1]
path = f"{w}/run/config.yaml"
config = yaml.safe_load(open(path))
config["capture"] = {"logprobs": True, "top_k": 20}
config["defaults"] = {"temperature": 1.0, "top_p": 1.0}  # the logprobs SGLang returns while generating are at T
config["engine"]["cache_dir"] = f"{w}/cost/results/engine-cache"  # one kernel cache for every step
yaml.safe_dump(config, open(path, "w"), sort_keys=False)
cost = yaml.safe_load(open(f"{w}/cost/config.yaml"))
cost["engine"]["cache_dir"] = config["engine"]["cache_dir"]
yaml.safe_dump(cost, open(f"{w}/cost/config.yaml", "w"), sort_keys=False)
EOF
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RES/gpu.txt"
    step cost
    python3 benchmarks/capture/capture_cost.py --config $W/cost/config.yaml --out "$RES/capture_cost.json" \
      > "$RES/cost.out" 2> "$RES/cost.err"
    step run
    t0=$(date +%s)
    snakemake --cores 16 --resources gpu=1 --configfile $W/run/config.yaml > "$RES/run.snakemake.log" 2>&1
    echo "workflow_wall_s $(( $(date +%s) - t0 ))" > "$RES/run-files.txt"
    (cd $W/run/results && find generate dataset exports merge report -type f -printf '%s %p\n' | sort -k2) >> "$RES/run-files.txt"
    cp $W/run/results/generate/shard-000.done.json "$RES/run-done.json"
    cp $W/run/results/report/summary.json "$RES/run-summary.json" 2>/dev/null
    step audit
    shardgen --config $W/run/config.yaml audit --sample 200 --top-k 20 \
      --against engine.args.mamba_ssm_dtype=bfloat16 --against engine.args.kv_cache_dtype=fp8_e4m3 \
      > "$RES/audit.out" 2> "$RES/audit.err"
    cp $W/run/results/audit/summary.json "$RES/audit-summary.json" 2>/dev/null
    cp $W/run/results/audit/turns.parquet "$RES/audit-turns.parquet" 2>/dev/null
    step end ;;
  demo-audit)
    # The audit on a model with real distributions (the demo's tiny Nemotron-H, trained by the workflow, SGLang-
    # sized): the demo on SGLang with capture at temperature 1, then own, a bfloat16 SSM state, an fp8 KV cache and
    # the CPU reference engine on the same weights.
    mkdir -p "$W"
    step demo-run
    printf 'results_dir: %s\nmodel: {path: %s/demo-model}\ncapture: {logprobs: true, top_k: 20}\n' \
      "$W/demo/results" "$W/demo/results" > $W/demo-capture.yaml
    printf 'defaults: {temperature: 1.0, top_p: 1.0}\n' >> $W/demo-capture.yaml
    snakemake --cores 16 --resources gpu=1 --configfile config/demo.yaml config/demo-sglang.yaml $W/demo-capture.yaml \
      > "$RES/demo.snakemake.log" 2>&1
    step demo-audit
    # the config the run's jobs read (Snakemake's overlay of the three files, resolved): the audit's own setting
    config=$(ls -t $W/demo/results/.shardgen/config-*.json | head -1)
    shardgen --config "$config" audit --sample 200 --top-k 20 \
      --against engine.args.mamba_ssm_dtype=bfloat16 --against engine.args.kv_cache_dtype=fp8_e4m3 \
      --against engine.backend=transformers,gpus=0 > "$RES/demo-audit.out" 2> "$RES/demo-audit.err"
    cp $W/demo/results/audit/summary.json "$RES/demo-audit-summary.json" 2>/dev/null
    step demo-end ;;
  collect)
    for f in steps.txt gpu.txt capture_cost.json run-files.txt run-done.json run-summary.json audit.out \
             audit-summary.json audit-turns.parquet demo-audit.out demo-audit-summary.json; do
      [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
    done
    tail -c 2500 "$RES"/*.err 2>/dev/null | grep -v "Decode batch\|Prefill batch" | tail -30
    tail -5 "$RES/run.snakemake.log" 2>/dev/null
    cat "$RES/cost.out" 2>/dev/null | tail -12
    cat "$RES/steps.txt" ;;
esac
