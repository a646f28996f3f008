#!/usr/bin/env bash
# Hidden states on one GPU (one lease, one kernel cache), behind benchmarks/results/*-hidden-*:
#   setsid bash benchmarks/sessions/hidden.sh all > /root/res/session.log 2>&1 &   (from the repo root there)
#   bash benchmarks/sessions/hidden.sh collect                                     (packs what exists into $OUT)
# Poll with `collect` at most every ~25 s of your own time: a machine left without a call for 30 s goes back, the
# session running on it included (the 2026-12-07 lease lost its bf16 and on2 arms so). Then, here:
#   python benchmarks/capture/hidden_summary.py --prefix benchmarks/results/DATE-CARD-hidden --out ...-summary.json
# all: the nh8b model (dummy weights, the shipped engine section plus load_format dummy and fa3) and a workload
# shaped like the 650K-prompt job (answers several times their prompts: JOB_MIX), then, in order of value,
#   warm: 64 short prompts with capture on (untimed: the cold start fills the kernel cache for every later arm);
#   off / on: `snakemake --until generate` on the same rows without and with capture.hidden_states (eagle3,
#     bfloat16): each run's done file (the engine's hidden_pass split: the pass's wall, the hooks' hold on the
#     scheduler, the writer, the read and encode), its generate log and the bytes on disk;
#   values: benchmarks/capture/hidden_values.py (the captured layer L against SGLang's return_hidden_states, and
#     L's scale);
#   bf16: the off run again with engine.args.mamba_ssm_dtype bfloat16 (the Mamba state's dtype on the card);
#   on2: the capture run again, after the others (its order against off's).
# dtype: off, bf16 and off again (off2) alone.
# Each result is written under $RES as soon as it exists; a step that fails leaves its log and the next one runs.
set -uo pipefail
source benchmarks/sessions/driver.sh
W=${HIDDEN_DIR:-/root/hidden}
JOB_MIX=${JOB_MIX:-job:1000:768}

# workflow ARM: snakemake up to generate on $W/ARM/config.yaml (~38 GB of states for the capture arms: the card's
# 64 GiB disk holds one at a time, so each arm's results go once measured); its wall, done file and files' bytes
workflow() {
  local t0 t1 results="$W/$1/results"
  t0=$(date +%s.%N)
  snakemake --cores 16 --resources gpu=1 --configfile "$W/$1/config.yaml" --until generate \
    > "$RES/$1.snakemake.log" 2>&1
  echo "rc $?" >> "$RES/$1.snakemake.log"
  t1=$(date +%s.%N)
  python3 -c "print('workflow_wall_s', round($t1 - $t0, 1))" > "$RES/$1-files.txt"
  (cd "$results" && find generate -type f -printf '%s %p\n' | sort -k2) >> "$RES/$1-files.txt"
  cp "$results/generate/shard-000.done.json" "$RES/$1-done.json"
  cp "$results/logs/generate/shard-000.log" "$RES/$1-generate.log" 2>/dev/null
  gzip -kf "$RES/$1-generate.log" 2>/dev/null
  rm -rf "$results/generate" "$results/dataset"
}

# setup: the model, the workloads and every arm's config
setup() {
  python3 .gpu/kit/make_model.py /root/model --only nh8b > /dev/null
  python3 benchmarks/engine/variable_length.py make --out $W/off --model /root/model/nh8b --engine shipped \
    --mix "$JOB_MIX" > /dev/null
  python3 benchmarks/engine/variable_length.py make --out $W/warm --model /root/model/nh8b --engine shipped \
    --mix warm:64:64 > /dev/null
  python3 - "$W" <<'PY'
import copy, sys, yaml
w = sys.argv[1]
off = yaml.safe_load(open(f"{w}/off/config.yaml"))
off["engine"]["cache_dir"] = f"{w}/engine-cache"  # one kernel cache for every arm
hidden = {"hidden_states": {"enabled": True, "layers": "eagle3", "dtype": "bfloat16"}}
arms = {"off": off, "on": {**copy.deepcopy(off), "capture": hidden},
        "bf16": copy.deepcopy(off), "off2": copy.deepcopy(off), "on2": {**copy.deepcopy(off), "capture": hidden}}
arms["bf16"]["engine"]["args"]["mamba_ssm_dtype"] = "bfloat16"
warm = yaml.safe_load(open(f"{w}/warm/config.yaml"))
arms["warm"] = {**warm, "engine": off["engine"], "capture": hidden}
for name, config in arms.items():
    import os
    os.makedirs(f"{w}/{name}", exist_ok=True)
    if name not in ("off", "warm"):
        config["results_dir"] = f"{w}/{name}/results"
    yaml.safe_dump(config, open(f"{w}/{name}/config.yaml", "w"), sort_keys=False)
PY
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$RES/gpu.txt"
  df -h /dev/shm >> "$RES/gpu.txt"
}

case "$1" in
  all)
    step setup
    setup
    for arm in warm off on; do step $arm; workflow $arm; done
    step values
    python3 benchmarks/capture/hidden_values.py --config $W/on/config.yaml --out "$RES/hidden_values.json" \
      > "$RES/values.out" 2> "$RES/values.err"
    for arm in bf16 on2; do step $arm; workflow $arm; done
    step end ;;
  dtype)  # the Mamba state's dtype alone, for a short lease: float32, bfloat16, float32 again (JOB_MIX smaller)
    step setup
    setup
    for arm in off bf16 off2; do step $arm; workflow $arm; done
    step end ;;
  collect)  # one archive: a call brings back a limited count of files
    (cd "$RES" && tar czf "$OUT/res.tgz" --exclude='*.snakemake.log' --exclude='*-generate.log' --exclude='*.err' \
      --exclude='session.log' .)
    for f in "$RES"/*.snakemake.log; do tail -1 "$f"; done
    tail -c 1500 "$RES"/values.err 2>/dev/null | grep -v "Decode batch\|Prefill batch" | tail -12
    cat "$RES/values.out" 2>/dev/null
    cat "$RES/steps.txt" ;;
esac
