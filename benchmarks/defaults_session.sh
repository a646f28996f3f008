#!/usr/bin/env bash
# The shipped defaults on one GPU (one lease, one kernel cache), behind benchmarks/results/*-defaults-*:
#   setsid bash benchmarks/defaults_session.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/defaults_session.sh collect                                      (copies what exists to $OUT)
# all: the nh8b model (round-trip vocabulary, for multi-turn) and two workloads made with the shipped engine
# section (`--engine shipped`: only load_format dummy and fa3 added); then, in this order,
#   single-turn (a)/(a'): Engine.generate(list) over the rows with the server args `auto` resolved (one engine,
#     a 64-prompt warm-up first: its start is the cold one and fills the kernel cache);
#   single-turn (b): `snakemake --cores 16 --resources gpu=1` with the shipped defaults (warm cache);
#   multi-turn: each_turn under the defaults (auto: a prefix cache) vs the same tokens as single turns (auto:
#     no_radix), on the same kernel cache.
# Each result is written under $RES as soon as it exists; a step that fails leaves its log and the next one runs.
set -uo pipefail
source benchmarks/gpu_session_common.sh
W=${DEFAULTS_DIR:-/root/defaults}
MIX=${DEFAULTS_MIX:-reasoning:60:1536,web:120:768,code:180:384,chat:360:128}
CONVERSATIONS=${DEFAULTS_CONVERSATIONS:-1000}
case "$1" in
  all)
    step setup
    python3 .gpu/kit/make_model.py /root/model --only nh8b --round-trip > /dev/null
    python3 benchmarks/variable_length.py make --out $W/single --model /root/model/nh8b --engine shipped --mix "$MIX"
    python3 benchmarks/multi_turn.py make --out $W/multi --model /root/model/nh8b --engine shipped \
      --conversations "$CONVERSATIONS" --max-new-tokens ${DEFAULTS_MT_TOKENS:-64}
    # one kernel cache for every arm: the multi-turn config points at the single-turn one
    sed -i "s#cache_dir: .*#cache_dir: $W/single/results/engine-cache#" $W/multi/each_turn.yaml
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RES/gpu.txt"
    step arms
    python3 benchmarks/variable_length.py arms --config $W/single/config.yaml --out "$RES/arms.json" \
      > "$RES/arms.out" 2> "$RES/arms.err"
    step workflow
    t0=$(date +%s.%N)
    snakemake --cores 16 --resources gpu=1 --configfile $W/single/config.yaml > "$RES/workflow.snakemake.log" 2>&1
    t1=$(date +%s.%N)
    cp $W/single/results/generate/shard-000.done.json "$RES/workflow-done.json"
    python3 benchmarks/variable_length.py collect --config $W/single/config.yaml --arms "$RES/arms.json" \
      --wall "$(python3 -c "print($t1 - $t0)")" --out "$RES/single_turn.json" > "$RES/collect.out" 2>&1
    step multi
    python3 benchmarks/multi_turn.py arms --config $W/multi/each_turn.yaml --out "$RES/multi_turn.json" \
      --arms each_turn:auto,single_turn:auto --warm-up 0 > "$RES/multi.out" 2> "$RES/multi.err"
    step end ;;
  collect)
    for f in steps.txt gpu.txt arms.json single_turn.json multi_turn.json workflow-done.json; do
      [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
    done
    tail -c 3000 "$RES"/*.err 2>/dev/null | grep -v "Decode batch\|Prefill batch" | tail -40
    grep -h "Decode batch" "$RES"/*.err 2>/dev/null | tail -2
    cat "$RES/steps.txt" ;;
esac
