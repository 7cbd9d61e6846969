#!/usr/bin/env bash
# scripts/prometheus-local-down.sh - stop the Prometheus scripts/prometheus-local-up.sh started
# (by the pid it wrote under $PROMETHEUS_LOCAL_DIR, default /tmp/astra-prometheus);
# `--purge` also deletes that folder (its data and log).
set -euo pipefail

: "${PROMETHEUS_LOCAL_DIR:=/tmp/astra-prometheus}"
log() { printf '[prometheus-local-down] %s\n' "$*" >&2; }

PIDFILE=$PROMETHEUS_LOCAL_DIR/prometheus.pid
if [ -s "$PIDFILE" ]; then
  pid=$(cat "$PIDFILE")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    log "stopped prometheus (pid $pid)"
  fi
  rm -f "$PIDFILE"
fi
if [ "${1:-}" = --purge ]; then
  rm -rf "$PROMETHEUS_LOCAL_DIR"
  log "deleted $PROMETHEUS_LOCAL_DIR"
fi
