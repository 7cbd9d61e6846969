#!/usr/bin/env bash
# scripts/slurm-local-up.sh - install, configure and start a throw-away Slurm 22.05 cluster on
# THIS machine (Debian 12, as root, no systemd), for astra's development and CI (`task slurm:up`).
# Adapted from ../shared/notes/slurm-local-up.reference.sh; what was learnt is in
# ../shared/notes/slurm-local.md, how astra uses it in docs/slurm.md.
#
#   * Debian packages: slurmctld slurmd slurm-client munge (+ slurmrestd if SLURM_LOCAL_RESTD=1),
#     installed if missing, with --no-install-recommends; postinst scripts may not start daemons.
#   * Everything lives under $SLURM_LOCAL_DIR (default /tmp/slurmtest): config, state, logs, pid
#     files, a private munged and its socket, fake GPU device nodes. Loopback only: slurmctld,
#     slurmd and srun bind to the loopback address their names resolve to, never to 0.0.0.0
#     (CommunicationParameters=NoCtldInAddrAny,NoInAddrAny; SlurmctldHost and NodeAddr are
#     127.0.0.1). Check with `ss -ltnp | grep slurm`.
#   * astra's defaults: TWO virtual nodes (two slurmd on this host, `<host>-n1`, `<host>-n2`), so
#     that multi-machine gangs and heterogeneous jobs run; 8 fake GPUs, 128 CPUs and 1 TiB per node
#     (advertised, not real: CR_Core does not count memory), so that the seeds' examples fit;
#     MinJobAge=3600 (finished jobs stay visible an hour); DependencyParameters=kill_invalid_depend.
#   * Fake GPUs: GresTypes=gpu, gres.conf File= pointing at char devices that are clones of
#     /dev/null (slurmd drops "file-less" GPUs, so Count= alone does not work).
#   * No accounting daemon: AccountingStorageType=accounting_storage/none,
#     JobCompType=jobcomp/filetxt ($DIR/log/jobcomp.txt, readable with `sacct -c`).
#
# Idempotent: if the cluster is already up, healthy and the generated config is unchanged it does
# nothing (running jobs survive); otherwise it stops what it started before (by pid files) and
# starts again from EMPTY state (job ids restart at 1). SLURM_LOCAL_FRESH=1 forces a restart.
#
# Afterwards:   export SLURM_CONF=$SLURM_LOCAL_DIR/etc/slurm.conf   (or: . $DIR/env.sh)
# (with SLURM_LOCAL_ETC_LINK=1, the default, /etc/slurm/slurm.conf is a symlink to it,
#  so plain sbatch/squeue work without SLURM_CONF). Stop with scripts/slurm-local-down.sh.
set -euo pipefail

: "${SLURM_LOCAL_DIR:=/tmp/slurmtest}"
: "${SLURM_LOCAL_NODES:=2}"            # slurmd daemons (virtual nodes) on this host
: "${SLURM_LOCAL_CPUS:=128}"            # CPUs advertised per node (may exceed real cores)
: "${SLURM_LOCAL_GPUS:=8}"             # fake GPUs per node (0 = no GRES)
: "${SLURM_LOCAL_MEM_MB:=1048576}"     # RealMemory per node (not enforced, CR_Core)
: "${SLURM_LOCAL_PARTITION:=debug}"
: "${SLURM_LOCAL_MIN_JOB_AGE:=3600}"   # s a finished job stays in squeue/scontrol
: "${SLURM_LOCAL_CTLD_PORT:=6817}"
: "${SLURM_LOCAL_SLURMD_PORT:=6818}"   # first slurmd port; node i uses PORT+i-1
: "${SLURM_LOCAL_KILL_INVALID_DEPEND:=1}" # 1 = cancel jobs whose dependency can never be met
: "${SLURM_LOCAL_RESTD:=0}"            # 1 = also run slurmrestd on a unix socket
: "${SLURM_LOCAL_RESTD_USER:=nobody}"  # slurmrestd refuses to run as root
: "${SLURM_LOCAL_ETC_LINK:=1}"         # 1 = /etc/slurm/slurm.conf -> our slurm.conf
: "${SLURM_LOCAL_FRESH:=0}"            # 1 = restart from empty state even if healthy
: "${SLURM_LOCAL_TIMEOUT:=60}"         # s to wait for daemons / nodes
: "${SLURM_LOCAL_EXTRA_CONF:=}"        # extra slurm.conf lines (e.g. "EnforcePartLimits=ALL")

D=$SLURM_LOCAL_DIR
CONF=$D/etc/slurm.conf
export SLURM_CONF=$CONF
export PATH=$PATH:/usr/sbin:/sbin
T_START=$(date +%s%N)
log() { local ms=$(( ($(date +%s%N) - T_START) / 1000000 ))
        printf '[slurm-local-up %d.%03ds] %s\n' $((ms/1000)) $((ms%1000)) "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
case "$SLURM_LOCAL_NODES" in ''|*[!0-9]*|0) die "SLURM_LOCAL_NODES must be >= 1";; esac

# ---------------------------------------------------------------- 1. packages
PKGS="slurmctld slurmd slurm-client munge"
[ "$SLURM_LOCAL_RESTD" = 1 ] && PKGS="$PKGS slurmrestd"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  log "installing:$missing"
  own_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then        # keep postinst from starting daemons
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  ok=0
  for attempt in 1 2 3; do
    if apt-get update -qq >"/tmp/slurm_local_apt.log" 2>&1 &&
       apt-get install -y -qq --no-install-recommends $missing >>"/tmp/slurm_local_apt.log" 2>&1; then
      ok=1; break
    fi
    log "apt attempt $attempt failed, retrying"; sleep 3
  done
  if [ "$own_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  [ "$ok" = 1 ] || { tail -20 /tmp/slurm_local_apt.log >&2; die "apt-get install failed"; }
  log "packages installed"
fi
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
  && command -v sbatch >/dev/null || die "slurm binaries missing after install"

# ---------------------------------------------------------------- 2. config
H=$(hostname -s)
[ -n "$H" ] || H=localhost
NODES=()
if [ "$SLURM_LOCAL_NODES" = 1 ]; then NODES=("$H")
else for i in $(seq 1 "$SLURM_LOCAL_NODES"); do NODES+=("$H-n$i"); done; fi
NODELIST=$(IFS=,; echo "${NODES[*]}")

mkdir -p "$D"/etc "$D"/spool/ctld "$D"/log "$D"/run "$D"/munge "$D"/dev "$D"/jobs
chmod 755 "$D" "$D"/munge                  # munged: socket dir must be o+x

SCHED="bf_interval=1,sched_min_interval=0"
DEPEND=""   # 22.05: kill_invalid_depend is a DependencyParameters option (ignored in SchedulerParameters)
[ "$SLURM_LOCAL_KILL_INVALID_DEPEND" = 1 ] && DEPEND="DependencyParameters=kill_invalid_depend"

NEW=$(mktemp); NEWG=$(mktemp)
trap 'rm -f "$NEW" "$NEWG"' EXIT
{
cat <<EOF
# generated by scripts/slurm-local-up.sh - single-host test cluster for astra
ClusterName=astralocal
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket.2
SlurmctldPort=$SLURM_LOCAL_CTLD_PORT
SlurmdPort=$SLURM_LOCAL_SLURMD_PORT
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/d-%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=$SCHED
$DEPEND
SlurmdParameters=config_overrides
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
MinJobAge=$SLURM_LOCAL_MIN_JOB_AGE
MaxJobCount=100000
MaxArraySize=100001
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MessageTimeout=10
MpiDefault=none
MailProg=/bin/true
PropagateResourceLimits=NONE
EOF
[ "$SLURM_LOCAL_GPUS" -gt 0 ] && echo "GresTypes=gpu"
[ -n "$SLURM_LOCAL_EXTRA_CONF" ] && printf '%s\n' "$SLURM_LOCAL_EXTRA_CONF"
i=0
for n in "${NODES[@]}"; do
  i=$((i+1))
  line="NodeName=$n NodeHostname=$H NodeAddr=127.0.0.1 CPUs=$SLURM_LOCAL_CPUS RealMemory=$SLURM_LOCAL_MEM_MB State=UNKNOWN"
  [ "$SLURM_LOCAL_NODES" -gt 1 ] && line="$line Port=$((SLURM_LOCAL_SLURMD_PORT + i - 1))"
  [ "$SLURM_LOCAL_GPUS" -gt 0 ] && line="$line Gres=gpu:$SLURM_LOCAL_GPUS"
  echo "$line"
done
echo "PartitionName=$SLURM_LOCAL_PARTITION Nodes=$NODELIST Default=YES MaxTime=INFINITE State=UP"
} > "$NEW"
{
echo "AutoDetect=off"
if [ "$SLURM_LOCAL_GPUS" -gt 0 ]; then
  for n in "${NODES[@]}"; do
    echo "NodeName=$n Name=gpu File=$D/dev/$n/nvidia[0-$((SLURM_LOCAL_GPUS-1))]"
  done
fi
} > "$NEWG"

# ---------------------------------------------------------------- helpers
alive() { # pidfile comm -> 0 if that pid runs that program (zombies count as dead)
  local pid st
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  st=$(ps -o stat= -p "$pid" 2>/dev/null || true)
  case "$st" in Z*|'') return 1;; esac
  return 0
}
descendants() { # pid -> all descendant pids (job processes under a slurmstepd)
  ps -e -o pid=,ppid= | awk -v root="$1" '{ par[$1]=$2 }
    END { for (p in par) { q=par[p]; while (q > 1) { if (q == root) { print p; break } q=par[q] } } }'
}
stop_pidfile() { # pidfile comm
  local f=$1 c=$2 pid
  if alive "$f" "$c"; then
    pid=$(cat "$f"); kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do alive "$f" "$c" || break; sleep 0.1; done
    if alive "$f" "$c"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  fi
  rm -f "$f"
}
stop_all() {
  if alive "$D/run/slurmctld.pid" slurmctld; then   # end jobs so no slurmstepd outlives slurmd
    scancel --partition="$SLURM_LOCAL_PARTITION" >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do
      [ -z "$(squeue -h -t R,CG,S -o %A 2>/dev/null)" ] && break; sleep 0.2
    done
  fi
  stop_pidfile "$D/run/slurmrestd.pid" slurmrestd
  local f
  for f in "$D"/run/slurmd-*.pid; do if [ -e "$f" ]; then stop_pidfile "$f" slurmd; fi; done
  stop_pidfile "$D/run/slurmctld.pid" slurmctld
  # leftover slurmstepd of OUR cluster (identified by SLURM_CONF in its environment)
  local p
  for p in $(ps -e -o pid=,comm= | awk '$2=="slurmstepd"{print $1}'); do
    if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$CONF"; then
      kill -KILL $(descendants "$p") "$p" 2>/dev/null || true
    fi
  done
  stop_pidfile "$D/munge/munged.pid" munged
}
healthy() {
  alive "$D/munge/munged.pid" munged || return 1
  alive "$D/run/slurmctld.pid" slurmctld || return 1
  local n
  for n in "${NODES[@]}"; do alive "$D/run/slurmd-$n.pid" slurmd || return 1; done
  if [ "$SLURM_LOCAL_RESTD" = 1 ]; then alive "$D/run/slurmrestd.pid" slurmrestd || return 1; fi
  scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
  [ -n "$(sinfo -h -N -o '%T' 2>/dev/null)" ] || return 1
  ! sinfo -h -N -o '%T' 2>/dev/null | grep -qE 'down|drain|fail|inval|unk|not_responding|\*'
}

# ---------------------------------------------------------------- 3. already up?
if [ "$SLURM_LOCAL_FRESH" != 1 ] && cmp -s "$NEW" "$CONF" && cmp -s "$NEWG" "$D/etc/gres.conf" && healthy; then
  log "already up and healthy (config unchanged) - nothing to do"
  exit 0
fi
stop_all
cp "$NEW" "$CONF"; cp "$NEWG" "$D/etc/gres.conf"; chmod 644 "$CONF" "$D/etc/gres.conf"

# fresh state
rm -rf "$D"/spool/ctld/* "$D"/spool/d-*
for f in "$D"/log/*.log "$D"/log/jobcomp.txt "$D"/log/daemons.out; do   # keep one previous generation
  if [ -f "$f" ]; then mv -f "$f" "$f.old"; fi
done
for n in "${NODES[@]}"; do mkdir -p "$D/spool/d-$n"; done

# fake GPU device nodes (char devices 1,3 = clones of /dev/null); plain files as a fallback
rm -rf "$D"/dev/*
if [ "$SLURM_LOCAL_GPUS" -gt 0 ]; then
  for n in "${NODES[@]}"; do
    mkdir -p "$D/dev/$n"
    for g in $(seq 0 $((SLURM_LOCAL_GPUS-1))); do
      mknod -m 666 "$D/dev/$n/nvidia$g" c 1 3 2>/dev/null || : > "$D/dev/$n/nvidia$g"
    done
  done
fi

# /etc/slurm links so client commands work without SLURM_CONF
if [ "$SLURM_LOCAL_ETC_LINK" = 1 ]; then
  mkdir -p /etc/slurm
  for f in slurm.conf gres.conf; do
    if [ ! -e "/etc/slurm/$f" ] || [ -L "/etc/slurm/$f" ]; then ln -sfn "$D/etc/$f" "/etc/slurm/$f"
    else log "WARNING: /etc/slurm/$f exists and is not a link - left alone, use SLURM_CONF"; fi
  done
fi
printf 'export SLURM_CONF=%s\n' "$CONF" > "$D/env.sh"

# ---------------------------------------------------------------- 4. start
# munge: private key, socket, pid and log under $D/munge (no /etc/munge, /run/munge needed)
if [ ! -s "$D/munge/munge.key" ]; then
  mungekey -c -b 1024 -k "$D/munge/munge.key" 2>/dev/null || head -c 128 /dev/urandom > "$D/munge/munge.key"
fi
chown root:root "$D/munge/munge.key"; chmod 400 "$D/munge/munge.key"
rm -f "$D/munge/munge.socket.2" "$D/munge/munge.socket.2.lock"
munged --socket="$D/munge/munge.socket.2" --key-file="$D/munge/munge.key" \
       --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
       --seed-file="$D/munge/munged.seed" </dev/null >>"$D/log/daemons.out" 2>&1 \
  || { tail -5 "$D/munge/munged.log" >&2; die "munged failed"; }
for _ in $(seq 1 50); do [ -S "$D/munge/munge.socket.2" ] && break; sleep 0.1; done
munge -S "$D/munge/munge.socket.2" -n </dev/null | unmunge -S "$D/munge/munge.socket.2" >/dev/null \
  || die "munge self-test failed (see $D/munge/munged.log)"
log "munged up"

# slurmctld/slurmd run in the foreground (-D) in their own session, so that $! is their
# pid at once (the daemonizing parent returns before the pid file exists) and an early
# exit is noticed immediately instead of after the timeout.
setsid slurmctld -D -f "$CONF" </dev/null >>"$D/log/daemons.out" 2>&1 &
CTLD_PID=$!; echo "$CTLD_PID" > "$D/run/slurmctld.pid"
deadline=$(( $(date +%s) + SLURM_LOCAL_TIMEOUT ))
until scontrol ping 2>/dev/null | grep -q 'is UP'; do
  if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$CTLD_PID" 2>/dev/null; then
    tail -20 "$D/log/slurmctld.log" "$D/log/daemons.out" >&2; die "slurmctld not answering"
  fi
  sleep 0.1
done
log "slurmctld up (pid $CTLD_PID)"

SLURMD_PIDS=""
for n in "${NODES[@]}"; do
  setsid slurmd -D -f "$CONF" -N "$n" </dev/null >>"$D/log/daemons.out" 2>&1 &
  echo $! > "$D/run/slurmd-$n.pid"; SLURMD_PIDS="$SLURMD_PIDS $!"
done
until [ -n "$(sinfo -h -N -o '%T' 2>/dev/null)" ] && ! sinfo -h -N -o '%T' 2>/dev/null | grep -qv '^idle$'; do
  dead=""; for p in $SLURMD_PIDS; do kill -0 "$p" 2>/dev/null || dead="$dead $p"; done
  if [ -n "$dead" ] || [ "$(date +%s)" -ge "$deadline" ] || sinfo -h -N -o '%T' 2>/dev/null | grep -qE 'drain|inval|fail'; then
    sinfo -N -o '%N %T %E' >&2 || true
    for n in "${NODES[@]}"; do tail -10 "$D/log/slurmd-$n.log" >&2 || true; done
    tail -10 "$D/log/slurmctld.log" >&2
    die "nodes did not become idle"
  fi
  sleep 0.1
done
log "slurmd up: $NODELIST idle"

if [ "$SLURM_LOCAL_RESTD" = 1 ]; then
  mkdir -p "$D/rest"; chown "$SLURM_LOCAL_RESTD_USER" "$D/rest"; chmod 755 "$D/rest"
  rm -f "$D/rest/slurmrestd.sock"
  # openapi/dbv0.0.38 would need slurmdbd -> load only openapi/v0.0.38
  setsid slurmrestd -f "$CONF" -u "$SLURM_LOCAL_RESTD_USER" -s openapi/v0.0.38 -a rest_auth/local \
    "unix:$D/rest/slurmrestd.sock" </dev/null >>"$D/log/slurmrestd.log" 2>&1 &
  echo $! > "$D/run/slurmrestd.pid"
  for _ in $(seq 1 50); do [ -S "$D/rest/slurmrestd.sock" ] && break; sleep 0.1; done
  [ -S "$D/rest/slurmrestd.sock" ] || { tail -5 "$D/log/slurmrestd.log" >&2; die "slurmrestd failed"; }
  log "slurmrestd on unix:$D/rest/slurmrestd.sock (jobs submitted through it run as $SLURM_LOCAL_RESTD_USER)"
fi

log "cluster up: SLURM_CONF=$CONF nodes=$NODELIST cpus/node=$SLURM_LOCAL_CPUS gpus/node=$SLURM_LOCAL_GPUS"
