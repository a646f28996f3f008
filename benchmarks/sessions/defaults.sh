#!/usr/bin/env bash
# The shipped defaults on one GPU (one lease, one kernel cache), behind benchmarks/results/*-defaults-*:
#   setsid bash benchmarks/sessions/defaults.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/sessions/defaults.sh collect                                      (copies what exists to $OUT)
# all: the nh8b model (round-trip vocabulary, for multi-turn) and two workloads made with the shipped engine
# section (`--engine shipped`: only load_format dummy and fa3 added); then, in this order,
#   single-turn (a)/(a'): Engine.generate(list) over the rows with the server args `auto` resolved (one engine,
#     a 64-prompt warm-up first: its start is the cold one and fills the kernel cache);
#   single-turn (b): `snakemake --cores 16 --resources gpu=1` with the shipped defaults (warm cache);
#   multi-turn: each_turn under the defaults (auto: a prefix cache) vs the same tokens as single turns (auto:
#     no_radix), on the same kernel cache.
# Each result is written under $RES as soon as it exists; a step that fails leaves its log and the next one runs.
set -uo pipefail
source benchmarks/sessions/driver.sh
W=${DEFAULTS_DIR:-/root/defaults}
MIX=${DEFAULTS_MIX:-reasoning:60:1536,web:120:768,code:180:384,chat:360:128}
CONVERSATIONS=${DEFAULTS_CONVERSATIONS:-1000}
case "$1" in
  all)
    step setup
    make_workloads $W "$MIX" "$CONVERSATIONS" ${DEFAULTS_MT_TOKENS:-64}
    step arms
    python3 benchmarks/engine/variable_length.py arms --config $W/single/config.yaml --out "$RES/arms.json" \
      > "$RES/arms.out" 2> "$RES/arms.err"
    step workflow
    workflow_arm $W
    step multi
    multi_turn_arms $W
    step end ;;
  collect)
    for f in steps.txt gpu.txt arms.json single_turn.json multi_turn.json workflow-done.json; do
      [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
    done
    tail -c 3000 "$RES"/*.err 2>/dev/null | grep -v "Decode batch\|Prefill batch" | tail -40
    grep -h "Decode batch" "$RES"/*.err 2>/dev/null | tail -2
    cat "$RES/steps.txt" ;;
esac
