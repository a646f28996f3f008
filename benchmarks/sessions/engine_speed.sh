#!/usr/bin/env bash
# Issue 37 on one GPU (one lease, one kernel cache), behind benchmarks/results/*-engine-speed-*:
#   setsid bash benchmarks/sessions/engine_speed.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/sessions/engine_speed.sh collect                                      (copies what exists to $OUT)
# all, in order of value, each result under $RES as soon as it exists (a failed step leaves its log; the next runs):
#   single-turn (a'): Engine.generate(list) over the split shard's rows with the server args `auto` resolved (one
#     engine; its 64-request warm-up takes the machine's cold start, so both arms below run warm);
#   single-turn (b): `snakemake --cores 16 --resources gpu=1` at the shipped defaults, same rows;
#   multi-turn: each_turn at the defaults vs the same tokens as single turns (auto: no_radix);
#   single-turn (c): the same rows through a bare sglang.Engine sized by SGLang itself;
#   single-turn (b) again with capture.signal off: what the per-token signal costs inside the driver.
set -uo pipefail
source benchmarks/sessions/driver.sh
W=${SPEED_DIR:-/root/speed}
MIX=${SPEED_MIX:-reasoning:200:768,web:400:384,code:600:192,chat:1200:64}
CONVERSATIONS=${SPEED_CONVERSATIONS:-1000}
case "$1" in
  all)
    step setup
    make_workloads $W "$MIX" "$CONVERSATIONS" 64
    step arms
    python3 benchmarks/engine/variable_length.py arms --config $W/single/config.yaml --out "$RES/arms.json" \
      --order a_prime > "$RES/arms.out" 2> "$RES/arms.err"
    step workflow
    workflow_arm $W
    step multi
    multi_turn_arms $W
    step own
    python3 benchmarks/engine/variable_length.py own --config $W/single/config.yaml --out "$RES/own.json" \
      > "$RES/own.out" 2> "$RES/own.err"
    step signal_off
    sed "s#results_dir: .*#results_dir: $W/single/results-nosignal#" $W/single/config.yaml > $W/single/nosignal.yaml
    printf 'capture:\n  signal: false\n' >> $W/single/nosignal.yaml
    sed -i "s#cache_dir: .*##" $W/single/nosignal.yaml
    mkdir -p $W/single/results-nosignal && ln -sfn $W/single/results/engine-cache $W/single/results-nosignal/engine-cache
    snakemake --cores 16 --resources gpu=1 --configfile $W/single/nosignal.yaml --until generate \
      > "$RES/nosignal.snakemake.log" 2>&1
    cp $W/single/results-nosignal/generate/shard-000.done.json "$RES/nosignal-done.json"
    python3 benchmarks/engine/engine_speed_walls.py $W/single/results $W/single/results-nosignal \
      > "$RES/walls.json" 2>&1
    step end ;;
  collect)
    for f in steps.txt gpu.txt arms.json single_turn.json multi_turn.json workflow-done.json own.json \
             nosignal-done.json walls.json workflow-attempts.jsonl; do
      [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
    done
    for f in arms.err multi.err own.err workflow-generate.log; do  # engine logs, the decode and prefill lines kept
      [ -f "$RES/$f" ] && grep -E "Decode batch|Prefill batch|Retract|KV cache pool|max_total_num_tokens|Mamba Cache|Traceback|Error" "$RES/$f" | gzip > "$OUT/$f.gz"
    done
    tail -c 2000 "$RES"/*.err 2>/dev/null | grep -v "Decode batch\|Prefill batch" | tail -20
    cat "$RES/steps.txt" ;;
esac
