# Sourced by the GPU session scripts (defaults_session.sh, capture_session.sh), from the repo root on the GPU
# machine: results go under $RES as soon as they exist, the package is importable, `shardgen` is on PATH (the
# workflow's rules call it), and `step NAME` stamps the steps' log.
RES=${RES:-/root/res}
export PYTHONPATH="$PWD/workflow:${PYTHONPATH:-}" PATH="/root/bin:$PATH"
mkdir -p "$RES" /root/bin
printf '#!/bin/sh\nexec python3 -m shardgen.cli "$@"\n' > /root/bin/shardgen && chmod +x /root/bin/shardgen
step() { echo "== $1 $(date -u +%T)" >> "$RES/steps.txt"; }
