#!/usr/bin/env bash
# Stop what slurm-up.sh started, by pid file (never by process name).
D=${SLURM_CI_DIR:-/tmp/slurm-ci}
scancel --user=root 2>/dev/null || true
scontrol shutdown 2>/dev/null || true
for f in "$D/slurmctld.pid" "$D/slurmd.pid" /run/munge/munged.pid; do
  [ -s "$f" ] || continue
  p=$(cat "$f")
  for i in $(seq 20); do
    kill -0 "$p" 2>/dev/null || break
    [ "$i" = 1 ] && [ "$f" = /run/munge/munged.pid ] && kill "$p"
    sleep 0.25
  done
  kill -0 "$p" 2>/dev/null && kill -9 "$p"
done
true
