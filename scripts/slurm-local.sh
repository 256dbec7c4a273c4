#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine, for testing `gpuwmm campaign --slurm` against a
# real scheduler: installs Debian's slurm-wlm and munge where missing, writes a minimal
# slurm.conf (this host as controller and only node, with the feature `gpuwmm-local`, in one
# GPU-less partition `gpuwmm`), starts munged, slurmctld and slurmd in the background (no systemd
# needed), and waits until `sinfo` shows the node idle. Running it again when the cluster is up
# changes nothing.
#
# Needs root (to install packages and run the daemons as root). Prints `slurm-local: up` on
# success; on failure it prints why and exits with 1 (3 when not root, so callers can skip).
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
LOG_DIR=/var/log/slurm
PARTITION=${SLURM_LOCAL_PARTITION:-gpuwmm}
WAIT_S=${SLURM_LOCAL_WAIT_S:-60}
# The node's feature, for jobs that ask for a GPU kind (`--constraint`).
FEATURE=gpuwmm-local

say() { echo "slurm-local: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "not root: cannot install Slurm or start its daemons"
    exit 3
fi

# Callers at once (tests run in parallel) would each start daemons: the second slurmd finds its
# port taken and the node never answers. So one runs at a time; the next finds the cluster up.
# The daemons must not inherit the lock's descriptor (`9>&-` below): one that did would hold the
# lock for its whole life, and every later caller would wait forever (CI hung so at stop 38).
LOCK_WAIT_S=$((WAIT_S + 240))
exec 9>/run/gpuwmm-slurm-local.lock
if ! flock -w "$LOCK_WAIT_S" 9; then
    say "another slurm-local.sh held /run/gpuwmm-slurm-local.lock for over ${LOCK_WAIT_S}s"
    exit 1
fi

cluster_is_up() {
    command -v sinfo >/dev/null 2>&1 || return 1
    local state
    state=$(sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | head -n1) || return 1
    case "$state" in idle | mix | alloc) return 0 ;; *) return 1 ;; esac
}

if cluster_is_up; then
    # A cluster started by an older version of this script may lack the feature.
    scontrol update nodename="$(hostname -s)" availablefeatures="$FEATURE" \
        activefeatures="$FEATURE" >/dev/null 2>&1 || true
    say "up (already running; partition $PARTITION, feature $FEATURE)"
    exit 0
fi

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
    command -v munged >/dev/null 2>&1 || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
    chmod 0400 /etc/munge/munge.key
    if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "starting munged"
        if id munge >/dev/null 2>&1; then
            runuser -u munge -- munged --force 9>&-
        else
            munged --force 9>&-
        fi
    fi
    munge -n | unmunge >/dev/null
}

write_config() {
    local host node_line mem
    host=$(hostname -s)
    # `slurmd -C` prints this machine's NodeName line (CPUs, sockets, cores, memory).
    node_line=$(slurmd -C | head -n1)
    mem=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)
    node_line=$(echo "$node_line" | sed -E "s/RealMemory=[0-9]+/RealMemory=$mem/")
    mkdir -p "$CONF_DIR" "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
    cat >"$CONF" <<EOF
# Written by gpuwmm's scripts/slurm-local.sh: a one-node test cluster on $host.
ClusterName=gpuwmm-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# No accounting daemon: sacct has nothing, so finished jobs are read from the controller, which
# keeps them for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=3600
$node_line Feature=$FEATURE State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    say "wrote $CONF"
}

start_daemons() {
    if ! pgrep -x slurmctld >/dev/null; then
        say "starting slurmctld"
        slurmctld -i 9>&-
    fi
    if ! pgrep -x slurmd >/dev/null; then
        say "starting slurmd"
        slurmd 9>&-
    fi
}

wait_until_idle() {
    local waited=0
    until cluster_is_up; do
        if [ "$waited" -ge "$WAIT_S" ]; then
            say "the node did not become idle within ${WAIT_S}s; sinfo says:"
            sinfo -N -l >&2 || true
            say "see $LOG_DIR/slurmctld.log and $LOG_DIR/slurmd.log"
            exit 1
        fi
        # A node that was down before (an earlier slurmd that died) needs resuming.
        scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
        sleep 1
        waited=$((waited + 1))
    done
}

install_packages
start_munge
write_config
start_daemons
wait_until_idle
say "up (partition $PARTITION, feature $FEATURE)"
