#!/usr/bin/env bash
# scripts/slurm-local-down.sh - stop the cluster started by scripts/slurm-local-up.sh (`task slurm:down`).
# Cancels all jobs, then stops slurmrestd, slurmd(s), slurmctld and munged BY PID
# (pid files under $SLURM_LOCAL_DIR; each pid is checked against the expected program
# name before it is signalled - nothing is killed by name), then kills any slurmstepd
# left over from THIS cluster (recognised by SLURM_CONF=<our slurm.conf> in its environment).
# Idempotent: running it when nothing is up is a no-op.
#   --purge   also delete $SLURM_LOCAL_DIR and the /etc/slurm links pointing into it
set -euo pipefail
: "${SLURM_LOCAL_DIR:=/tmp/slurmtest}"
: "${SLURM_LOCAL_PARTITION:=debug}"
D=$SLURM_LOCAL_DIR
CONF=$D/etc/slurm.conf
export SLURM_CONF=$CONF
export PATH=$PATH:/usr/sbin:/sbin
[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }

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
    if alive "$f" "$c"; then echo "$c ($pid) ignored SIGTERM, sending SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
    echo "stopped $c ($pid)" >&2
  fi
  rm -f "$f"
}

if [ -f "$CONF" ] && alive "$D/run/slurmctld.pid" slurmctld; then
  scancel --partition="$SLURM_LOCAL_PARTITION" >/dev/null 2>&1 || true
  for _ in $(seq 1 50); do
    [ -z "$(squeue -h -t R,CG,S -o %A 2>/dev/null)" ] && break; sleep 0.2
  done
fi
stop_pidfile "$D/run/slurmrestd.pid" slurmrestd
for f in "$D"/run/slurmd-*.pid; do if [ -e "$f" ]; then stop_pidfile "$f" slurmd; fi; done
stop_pidfile "$D/run/slurmctld.pid" slurmctld
for p in $(ps -e -o pid=,comm= | awk '$2=="slurmstepd"{print $1}'); do
  if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$CONF"; then
    kids=$(descendants "$p")
    echo "killing leftover slurmstepd $p and its job processes:" $kids >&2
    kill -KILL $kids "$p" 2>/dev/null || true
  fi
done
stop_pidfile "$D/munge/munged.pid" munged

if [ "${1:-}" = "--purge" ]; then
  for f in /etc/slurm/slurm.conf /etc/slurm/gres.conf; do
    if [ -L "$f" ] && [ "$(readlink "$f")" = "$D/etc/$(basename "$f")" ]; then rm -f "$f"; fi
  done
  case "$D" in /|/tmp|/etc|/usr|/var|'') echo "refusing to delete $D" >&2; exit 1;; esac
  rm -rf "$D"
  echo "purged $D" >&2
fi
