# The one driver of the GPU sessions: every script beside it (capture, defaults, engine_speed, h200, hidden) sources
# it, run from the repo root on the GPU machine as `bash benchmarks/sessions/NAME.sh STEP`: the package is
# importable, `shardgen` is on PATH (the workflow's rules call it), results go under $RES as soon as they exist and
# `step NAME` stamps the steps' log; the workloads and the workflow and multi-turn arms the sessions share are below.
RES=${RES:-/root/res}
export PYTHONPATH="$PWD/workflow:${PYTHONPATH:-}" PATH="/root/bin:$PATH"
mkdir -p "$RES" /root/bin
printf '#!/bin/sh\nexec python3 -m shardgen.cli "$@"\n' > /root/bin/shardgen && chmod +x /root/bin/shardgen
step() { echo "== $1 $(date -u +%T)" >> "$RES/steps.txt"; }

# make_workloads DIR MIX CONVERSATIONS TOKENS: the round-trip nh8b (for multi-turn), the single-turn sources of MIX
# (name:rows:max_new_tokens,...) and CONVERSATIONS multi-turn ones of TOKENS a turn, each with the shipped engine
# section (`--engine shipped`: only load_format dummy and fa3 added), on one kernel cache (the single-turn one).
make_workloads() {
  python3 .gpu/kit/make_model.py /root/model --only nh8b --round-trip > /dev/null
  python3 benchmarks/engine/variable_length.py make --out "$1/single" --model /root/model/nh8b --engine shipped \
    --mix "$2"
  python3 benchmarks/engine/multi_turn.py make --out "$1/multi" --model /root/model/nh8b --engine shipped \
    --conversations "$3" --max-new-tokens "$4"
  sed -i "s#cache_dir: .*#cache_dir: $1/single/results/engine-cache#" "$1/multi/each_turn.yaml"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RES/gpu.txt"
}

# workflow_arm DIR: (b), `snakemake` on the single-turn workload; its done file, attempts and generate log, and
# variable_length.py collect's figures beside the engine arms of $RES/arms.json.
workflow_arm() {
  local t0 t1 results="$1/single/results"
  t0=$(date +%s.%N)
  snakemake --cores 16 --resources gpu=1 --configfile "$1/single/config.yaml" > "$RES/workflow.snakemake.log" 2>&1
  t1=$(date +%s.%N)
  cp "$results/generate/shard-000.done.json" "$RES/workflow-done.json"
  cp "$results/generate/shard-000/attempts.jsonl" "$RES/workflow-attempts.jsonl" 2>/dev/null
  cp "$results/logs/generate/shard-000.log" "$RES/workflow-generate.log" 2>/dev/null
  python3 benchmarks/engine/variable_length.py collect --config "$1/single/config.yaml" --arms "$RES/arms.json" \
    --wall "$(python3 -c "print($t1 - $t0)")" --out "$RES/single_turn.json" > "$RES/collect.out" 2>&1
}

# multi_turn_arms DIR: each_turn at the defaults against the same tokens as single turns, on the warm cache.
multi_turn_arms() {
  python3 benchmarks/engine/multi_turn.py arms --config "$1/multi/each_turn.yaml" --out "$RES/multi_turn.json" \
    --arms each_turn:auto,single_turn:auto --warm-up 0 > "$RES/multi.out" 2> "$RES/multi.err"
}
