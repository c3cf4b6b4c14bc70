#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for tests/test_slurm.py and CI.
#
#   bash tests/slurm/cluster.sh [start]   install if missing, configure, start, wait until idle
#   bash tests/slurm/cluster.sh stop      stop the daemons by the PIDs in their pid files,
#                                         and remove slurm.conf (see stop())
#   bash tests/slurm/cluster.sh status    say which daemons run and what sinfo reports
#
# Idempotent: `start` on a running cluster with an unchanged configuration only
# checks that the node is idle. Needs root and Debian's apt (SLURM 22.05 + munge);
# exits 3 when it cannot have them, so callers can skip instead of fail.
#
# The cluster: one node `localhost` (127.0.0.1) in two partitions, `ci` (default)
# and `ci_gpu`, with two fake GPUs. The GPUs are character devices made with mknod
# (major 195, like /dev/nvidia*) that nothing ever opens: SLURM only needs files to
# hand out, so jobs asking for `--gpus=1` are scheduled and get CUDA_VISIBLE_DEVICES,
# while the code inside still finds no CUDA and stays on the CPU.
#
# No systemd here: the packages' postinst cannot start services, so the daemons are
# started by hand (munged as user munge, then slurmctld, then `slurmd -N localhost`).
set -euo pipefail

ETC=/etc/slurm
SPOOL=/var/spool/slurm
LOGDIR=/var/log/slurm
RUNDIR=/run/slurm
FAKEGPU_DIR=$SPOOL/fakegpu
MUNGE_RUN=/run/munge
MUNGE_PID=$MUNGE_RUN/munged.pid
CTLD_PID=$RUNDIR/slurmctld.pid
SLURMD_PID=$RUNDIR/slurmd.pid
PACKAGES=(slurmctld slurmd slurm-client munge)
# Partition names of this test cluster: the site values tests/test_slurm.py puts
# into its copy of profiles/slurm/config.yaml.
CPU_PARTITION=ci
GPU_PARTITION=ci_gpu
# A node needs at least this many CPU slots so that the training job's
# --cpus-per-gpu fits; on smaller machines the slots are oversubscribed.
MIN_CPUS=4
WAIT_IDLE_S=${SLURM_WAIT_IDLE_S:-60}

log() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() { log "$1"; exit "${2:-1}"; }

alive() { # alive PIDFILE -> 0 when the process named in the pid file runs
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    command -v apt-get >/dev/null || die "apt-get not found: cannot install ${missing[*]}" 3
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
        # the package lists may be missing or stale on a fresh machine
        apt-get update -q >/dev/null || die "apt-get update failed" 3
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
            || die "apt-get install ${missing[*]} failed" 3
    fi
}

make_fake_gpus() {
    mkdir -p "$FAKEGPU_DIR"
    local i
    for i in 0 1; do
        if [[ ! -c $FAKEGPU_DIR/nvidia$i ]]; then
            rm -f "$FAKEGPU_DIR/nvidia$i"
            mknod -m 666 "$FAKEGPU_DIR/nvidia$i" c 195 "$i"
        fi
    done
}

node_line() {
    local cpus mem_mb
    cpus=$(nproc)
    ((cpus < MIN_CPUS)) && cpus=$MIN_CPUS
    # RealMemory a bit under MemTotal (90 %), in MiB
    mem_mb=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
    echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:2 State=UNKNOWN"
}

write_if_changed() { # write_if_changed PATH  (content on stdin); returns 0 if it changed
    local tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [[ -f $1 ]] && cmp -s "$tmp" "$1"; then
        rm -f "$tmp"
        return 1
    fi
    install -m 644 "$tmp" "$1"
    rm -f "$tmp"
    return 0
}

write_config() { # returns 0 when slurm.conf or gres.conf changed
    mkdir -p "$ETC" "$SPOOL/ctld" "$SPOOL/d" "$LOGDIR" "$RUNDIR"
    local changed=1
    write_if_changed "$ETC/slurm.conf" <<EOF && changed=0
# Written by tests/slurm/cluster.sh: a one-node test cluster on localhost.
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
# Trust the node line below over what slurmd detects (CPU slots, see MIN_CPUS).
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
# squeue shows finished jobs for MinJobAge seconds; the executor plugin's squeue
# status command needs it >= 3 x its first status interval.
MinJobAge=300
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
Waittime=0
$(node_line)
PartitionName=$CPU_PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=$GPU_PARTITION Nodes=localhost Default=NO MaxTime=INFINITE State=UP
EOF
    write_if_changed "$ETC/gres.conf" <<EOF && changed=0
# Written by tests/slurm/cluster.sh: two fake GPUs (device nodes never opened).
NodeName=localhost Name=gpu File=$FAKEGPU_DIR/nvidia[0-1]
EOF
    return $changed
}

start_munge() {
    alive "$MUNGE_PID" && return 0
    mkdir -p "$MUNGE_RUN" /var/log/munge /var/lib/munge
    chown munge:munge "$MUNGE_RUN" /var/log/munge /var/lib/munge
    chmod 0755 "$MUNGE_RUN"
    if [[ ! -s /etc/munge/munge.key ]]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    rm -f "$MUNGE_RUN/munge.socket.2" "$MUNGE_RUN/munge.socket.2.lock" "$MUNGE_PID"
    runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID"
    local i
    for i in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged does not answer (see /var/log/munge/munged.log)"
}

wait_idle() {
    local deadline=$((SECONDS + WAIT_IDLE_S)) state
    while ((SECONDS < deadline)); do
        state=$(sinfo -h -N -n localhost -o '%T' 2>/dev/null | head -n1 || true)
        case $state in
            idle | mixed | allocated) return 0 ;;
            down* | drain* | drained*)
                scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 || true ;;
        esac
        sleep 0.5
    done
    log "node not idle after ${WAIT_IDLE_S}s (state: ${state:-none}); tail of the logs:"
    tail -n 20 "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log" >&2 || true
    exit 1
}

start() {
    [[ $(id -u) == 0 ]] || die "needs root (to install packages and start the daemons)" 3
    install_packages
    make_fake_gpus
    local changed=1
    write_config && changed=0
    if ((changed == 0)) && { alive "$CTLD_PID" || alive "$SLURMD_PID"; }; then
        log "configuration changed: restarting the daemons"
        stop_slurm
    fi
    start_munge
    if ! alive "$CTLD_PID"; then
        # -c: start without the job records of earlier runs
        slurmctld -c
    fi
    if ! alive "$SLURMD_PID"; then
        slurmd -N localhost
    fi
    wait_idle
    log "cluster up: $(sinfo -h -o '%P %a %D %T %G' | tr '\n' ';')"
}

stop_pidfile() { # stop_pidfile NAME PIDFILE
    local pid i
    alive "$2" || { rm -f "$2"; return 0; }
    pid=$(<"$2")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$2"; return 0; }
        sleep 0.1
    done
    log "$1 ($pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$2"
}

stop_slurm() {
    stop_pidfile slurmd "$SLURMD_PID"
    stop_pidfile slurmctld "$CTLD_PID"
}

stop() {
    stop_slurm
    stop_pidfile munged "$MUNGE_PID"
    # Leave no configured-but-dead cluster behind: with slurm.conf in place every SLURM
    # client call (and so every Snakemake start, whose SLURM executor plugin runs
    # `scontrol show config` at import) waits ~9 s for the missing controller; without
    # it they fail at once. `start` writes it again.
    rm -f "$ETC/slurm.conf"
    log "stopped"
}

status() {
    local name file rc=0
    for name in munged:$MUNGE_PID slurmctld:$CTLD_PID slurmd:$SLURMD_PID; do
        file=${name#*:}
        if alive "$file"; then
            echo "${name%%:*}: running (pid $(<"$file"))"
        else
            echo "${name%%:*}: not running"
            rc=1
        fi
    done
    if ((rc == 0)); then
        sinfo -o '%P %a %D %T %G' || rc=1
    fi
    return $rc
}

case ${1:-start} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 [start|stop|status]" 2 ;;
esac
