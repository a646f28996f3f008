#!/usr/bin/env bash
# Issue 37 on one GPU (one lease, one kernel cache), behind benchmarks/results/*-engine-speed-*:
#   setsid bash benchmarks/engine_speed_session.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/engine_speed_session.sh collect                                      (copies what exists to $OUT)
# all, in order of value, each result under $RES as soon as it exists (a failed step leaves its log; the next runs):
#   single-turn (a'): Engine.generate(list) over the split shard's rows with the server args `auto` resolved (one
#     engine; its 64-request warm-up takes the machine's cold start, so both arms below run warm);
#   single-turn (b): `snakemake --cores 16 --resources gpu=1` at the shipped defaults, same rows;
#   multi-turn: each_turn at the defaults vs the same tokens as single turns (auto: no_radix);
#   single-turn (c): the same rows through a bare sglang.Engine sized by SGLang itself;
#   single-turn (b) again with capture.signal off: what the per-token signal costs inside the driver.
set -uo pipefail
source benchmarks/gpu_session_common.sh
W=${SPEED_DIR:-/root/speed}
MIX=${SPEED_MIX:-reasoning:200:768,web:400:384,code:600:192,chat:1200:64}
CONVERSATIONS=${SPEED_CONVERSATIONS:-1000}
case "$1" in
  all)
    step setup
    python3 .gpu/kit/make_model.py /root/model --only nh8b --round-trip > /dev/null
    python3 benchmarks/variable_length.py make --out $W/single --model /root/model/nh8b --engine shipped --mix "$MIX"
    python3 benchmarks/multi_turn.py make --out $W/multi --model /root/model/nh8b --engine shipped \
      --conversations "$CONVERSATIONS" --max-new-tokens 64
    sed -i "s#cache_dir: .*#cache_dir: $W/single/results/engine-cache#" $W/multi/each_turn.yaml
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RES/gpu.txt"
    step arms
    python3 benchmarks/variable_length.py arms --config $W/single/config.yaml --out "$RES/arms.json" --order a_prime \
      > "$RES/arms.out" 2> "$RES/arms.err"
    step workflow
    t0=$(date +%s.%N)
    snakemake --cores 16 --resources gpu=1 --configfile $W/single/config.yaml > "$RES/workflow.snakemake.log" 2>&1
    t1=$(date +%s.%N)
    cp $W/single/results/generate/shard-000.done.json "$RES/workflow-done.json"
    cp $W/single/results/generate/shard-000/attempts.jsonl "$RES/workflow-attempts.jsonl" 2>/dev/null
    cp $W/single/results/logs/generate/shard-000.log "$RES/workflow-generate.log" 2>/dev/null
    python3 benchmarks/variable_length.py collect --config $W/single/config.yaml --arms "$RES/arms.json" \
      --wall "$(python3 -c "print($t1 - $t0)")" --out "$RES/single_turn.json" > "$RES/collect.out" 2>&1
    step multi
    python3 benchmarks/multi_turn.py arms --config $W/multi/each_turn.yaml --out "$RES/multi_turn.json" \
      --arms each_turn:auto,single_turn:auto --warm-up 0 > "$RES/multi.out" 2> "$RES/multi.err"
    step own
    python3 benchmarks/variable_length.py own --config $W/single/config.yaml --out "$RES/own.json" \
      > "$RES/own.out" 2> "$RES/own.err"
    step signal_off
    sed "s#results_dir: .*#results_dir: $W/single/results-nosignal#" $W/single/config.yaml > $W/single/nosignal.yaml
    printf 'capture:\n  signal: false\n' >> $W/single/nosignal.yaml
    sed -i "s#cache_dir: .*##" $W/single/nosignal.yaml
    mkdir -p $W/single/results-nosignal && ln -sfn $W/single/results/engine-cache $W/single/results-nosignal/engine-cache
    snakemake --cores 16 --resources gpu=1 --configfile $W/single/nosignal.yaml --until generate \
      > "$RES/nosignal.snakemake.log" 2>&1
    cp $W/single/results-nosignal/generate/shard-000.done.json "$RES/nosignal-done.json"
    python3 benchmarks/engine_speed_walls.py $W/single/results $W/single/results-nosignal > "$RES/walls.json" 2>&1
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
