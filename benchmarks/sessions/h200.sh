#!/usr/bin/env bash
# The H200 runs behind benchmarks/results/2026-12-03-h200-*: one step per call on one warm machine, in order.
#   bash benchmarks/sessions/h200.sh STEP      (from the repo root there; installed kit sourced; results to $OUT)
# setup: the nh8b dummy-weights model, the workload, `shardgen` on PATH; starts: engine start cold then warm
# (same cache_dir, new process each); arms: (a) and (a') in one engine; workflow: (b) with snakemake and the
# comparison JSON; drill: kill -9 of the scheduler mid-shard; empty: a start with an empty cache_dir (warm machine);
# eta: benchmarks/workflow/eta_accuracy.py on a variable-length mix; cpu: benchmarks/cpu/cpu_pipeline.py's prompts
# part on 1-16 workers.
# multi [ARMS]: the multi-turn benchmark (make once, then ARMS, default all four); one arm a call for the full
# workload (a no_radix arm is mostly prefill: several minutes); $MT_DIR's JSON gathers the arms across calls and
# is copied to $OUT. MT_MAKE: extra `make` flags (e.g. "--conversations 300") for the first call.
set -euo pipefail
W=${VL_DIR:-/root/vl}
CONFIG=$W/w/config.yaml
CACHE=$W/w/results/engine-cache   # the config's engine.cache_dir, resolved: arms and workflow share it
source benchmarks/sessions/driver.sh  # the package importable, `shardgen` on PATH (this session's results go to $OUT)
case "$1" in
  setup)
    mkdir -p "$W"
    python3 .gpu/kit/make_model.py /root/model --only nh8b > /dev/null
    python3 benchmarks/engine/variable_length.py make --out $W/w --model /root/model/nh8b
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ;;
  starts|cold)  # cold: the cold start alone, to warm the cache on a fresh machine
    labels="cold warm"; [ "$1" = cold ] && labels=cold
    for label in $labels; do
      python3 benchmarks/engine/engine_start.py --config $CONFIG --cache-dir $CACHE --label $label \
        --out $OUT/starts.json 2> $OUT/start-$label.err
    done ;;
  arms)
    python3 benchmarks/engine/variable_length.py arms --config $CONFIG --out $OUT/arms.json 2> $OUT/arms.err
    cp $OUT/arms.json $W/arms.json ;;
  workflow)
    t0=$(date +%s.%N)
    snakemake --cores 16 --resources gpu=1 --configfile $CONFIG > $OUT/workflow.snakemake.log 2>&1 || true
    t1=$(date +%s.%N)
    cp $W/w/results/logs/generate/shard-000.log $OUT/workflow-generate.log || true
    python3 benchmarks/engine/variable_length.py collect --config $CONFIG --arms $W/arms.json \
      --wall "$(python3 -c "print($t1 - $t0)")" --out $OUT/variable_length.json
    cp $W/w/results/generate/shard-000.done.json $OUT/workflow-done.json ;;
  drill)
    python3 benchmarks/workflow/scheduler_drill.py --config $CONFIG --out $OUT/drill.json 2> $OUT/drill.err
    cp $W/w/results-drill/logs/generate/shard-000.log $OUT/drill-generate.log || true ;;
  eta)  # the ETA at 10/25/50% of a 2x variable-length mix whose limits stop at 512 tokens (the longest request,
        # ~15 s, well inside the first 10% of the run: see README: ETA), parts committed every 10 s
    python3 benchmarks/engine/variable_length.py make --out $W/eta --model /root/model/nh8b --scale ${ETA_SCALE:-2} \
      --limit-cap 512 --checkpoint-seconds 10
    snakemake --cores 16 --resources gpu=1 --configfile $W/eta/config.yaml --until split > $OUT/eta.snakemake.log 2>&1
    python3 benchmarks/workflow/eta_accuracy.py --config $W/eta/config.yaml --save $OUT/eta_accuracy.json \
      > $OUT/eta.out 2> $OUT/eta.err ;;
  cpu)  # the prompts stage's scaling on the 16 cores, both tokenizers, against the floor
    python3 benchmarks/cpu/cpu_pipeline.py --parts prompts --rows 250000 --workers 1,4,8,16 --component-rows 20000 \
      --workdir $W/cpu --save $OUT/cpu_pipeline.json > $OUT/cpu.out 2>&1 ;;
  empty)
    python3 benchmarks/engine/engine_start.py --config $CONFIG --cache-dir $W/empty-cache \
      --label empty_cache_warm_machine --out $OUT/starts-empty.json 2> $OUT/start-empty.err ;;
  multi)
    M=${MT_DIR:-/root/mt}
    [ -f $M/each_turn.yaml ] ||
      python3 benchmarks/engine/multi_turn.py make --out $M --model /root/model/nh8b ${MT_MAKE:-}
    python3 benchmarks/engine/multi_turn.py arms --config $M/each_turn.yaml --out $M/multi_turn.json ${2:+--arms "$2"} \
      > $OUT/multi.log 2> $OUT/multi.err || status=$?
    cp $M/multi_turn.json $OUT/multi_turn.json || true
    exit ${status:-0} ;;
esac
