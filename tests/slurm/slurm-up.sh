#!/usr/bin/env bash
# Start a throwaway single-node Slurm cluster from Debian's packages (installed only if missing), as root.
# slurm.conf is generated from this machine (hostname, nproc, free -m). State and logs: $SLURM_CI_DIR.
# Stop it with slurm-down.sh (by pid file, never by process name).
set -euo pipefail
D=${SLURM_CI_DIR:-/tmp/slurm-ci}
mkdir -p "$D"/{ctld,d,log}
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
   || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurmctld slurmd slurm-client munge >/dev/null
fi
[ -s /etc/munge/munge.key ] || { mungekey -c -k /etc/munge/munge.key 2>/dev/null \
  || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key;
  chmod 400 /etc/munge/munge.key; }
install -d -o munge -g munge -m 755 /run/munge
if ! munge -n >/dev/null 2>&1; then su -s /bin/sh munge -c /usr/sbin/munged; fi
for i in $(seq 20); do munge -n >/dev/null 2>&1 && break; sleep 0.5; done
H=$(hostname -s); MEM=$(free -m | awk '/^Mem:/{print $2}'); NCPU=$(nproc)
mkdir -p /etc/slurm
# MinJobAge=600: the executor plugin falls back to sacct (which has no accounting here) when it is short.
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=ci
SlurmctldHost=${H}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
AuthType=auth/munge
StateSaveLocation=$D/ctld
SlurmdSpoolDir=$D/d
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=${H} NodeAddr=127.0.0.1 CPUs=${NCPU} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -i
slurmd
for i in $(seq 60); do sinfo -h -o %t 2>/dev/null | grep -qx idle && break; sleep 0.5; done
sinfo -h -o %t | grep -qx idle
