#!/usr/bin/env bash
# A one-machine Slurm cluster on 127.0.0.1 for the fleet tests and examples:
#   scripts/slurm-local.sh start   # installs slurm-wlm + munge (Debian) if missing, starts
#                                  # munged, slurmctld and slurmd; prints `export SLURM_CONF=…`
#   scripts/slurm-local.sh stop
# Configuration, state and logs live in .cache/slurm/ (ignored). Needs root (apt, daemons).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/slurm"
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"

install() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "slurm-local: installing slurm-wlm and munge from Debian" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
  fi
}

write_conf() {
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  local cpus mem
  cpus="$(nproc)"
  mem="$(awk '/MemTotal/ {print int($2/1024) - 1024}' /proc/meminfo)"
  cat > "$conf" <<EOF
ClusterName=pvisor-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=3600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

running() { sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mixed|allocated'; }

start() {
  install
  write_conf
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    sudo_munge="runuser -u munge --"
    $sudo_munge /usr/sbin/munged
  fi
  if ! running; then
    pkill -x slurmctld 2>/dev/null || true
    pkill -x slurmd 2>/dev/null || true
    /usr/sbin/slurmctld -i
    /usr/sbin/slurmd
    for _ in $(seq 1 60); do
      running && break
      sleep 0.5
    done
    if ! running; then
      scontrol update nodename=localhost state=resume 2>/dev/null || true
      sleep 1
    fi
    running || { echo "slurm-local: the node did not come up; see $dir/log" >&2; exit 1; }
  fi
  echo "export SLURM_CONF=$conf"
}

stop() {
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  conf) echo "$conf" ;;
  *) echo "usage: $0 start|stop|conf" >&2; exit 2 ;;
esac
