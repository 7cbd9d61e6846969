#!/usr/bin/env bash
# scripts/prometheus-local-up.sh - start a real Prometheus (Debian's `prometheus` package, 2.42)
# on loopback, scraping an astra server (`task prometheus:up`; `task test` runs it first).
#
#   * installs `prometheus` (and its `promtool`) with apt-get if missing (as root); no systemd
#     unit is used: the process is started here and stopped by its pid;
#   * config: $PROMETHEUS_LOCAL_CONFIG (default docs/prometheus/prometheus.yml, which scrapes
#     `astra server` on 127.0.0.1:8750 and loads the alert rules beside it, alerts.yml); the
#     tests pass a copy naming their own server. The config's folder's *.yml are copied into
#     $PROMETHEUS_LOCAL_DIR, with the token it sends (`astra.token`, mode 0600): $ASTRA_TOKEN,
#     else $ASTRA_HOME/token, else ~/.local/state/astra/token (a token with read on the org);
#   * listens on 127.0.0.1:$PROMETHEUS_LOCAL_PORT (default 9390), keeps its data, log and pid
#     under $PROMETHEUS_LOCAL_DIR (default /tmp/astra-prometheus);
#   * checks the config (`promtool check config`), waits for /-/ready, prints its URL.
#
# Idempotent: a Prometheus already running from this folder is left as it is (`--restart`
# stops it first, to read a changed config). Stop it with scripts/prometheus-local-down.sh.
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
: "${PROMETHEUS_LOCAL_CONFIG:=$HERE/docs/prometheus/prometheus.yml}"
: "${PROMETHEUS_LOCAL_PORT:=9390}"
: "${PROMETHEUS_LOCAL_DIR:=/tmp/astra-prometheus}"
: "${PROMETHEUS_LOCAL_TIMEOUT:=60}"
export PATH=$PATH:/usr/sbin:/sbin:/usr/bin

log() { printf '[prometheus-local-up] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

install_only=0
restart=0
for arg in "$@"; do
  case $arg in
    --install-only) install_only=1 ;;
    --restart) restart=1 ;;
    *) die "unknown argument $arg (takes --install-only, --restart)" ;;
  esac
done

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "prometheus is not installed: run this as root once (it installs Debian's prometheus)"
  log "installing prometheus (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
fi
[ "$install_only" = 1 ] && { prometheus --version 2>&1 | head -1 >&2; exit 0; }

mkdir -p "$PROMETHEUS_LOCAL_DIR/data"
cp "$(dirname "$PROMETHEUS_LOCAL_CONFIG")"/*.yml "$PROMETHEUS_LOCAL_DIR/"
CONFIG=$PROMETHEUS_LOCAL_DIR/$(basename "$PROMETHEUS_LOCAL_CONFIG")
umask 077
if [ -n "${ASTRA_TOKEN:-}" ]; then
  printf '%s' "$ASTRA_TOKEN" >"$PROMETHEUS_LOCAL_DIR/astra.token"
else
  found=${ASTRA_HOME:-$HOME/.local/state/astra}/token
  if [ -s "$found" ]; then cp "$found" "$PROMETHEUS_LOCAL_DIR/astra.token"
  else log "no token ($found): the scrape is refused until $PROMETHEUS_LOCAL_DIR/astra.token holds one"
       : >"$PROMETHEUS_LOCAL_DIR/astra.token"; fi
fi
umask 022
PIDFILE=$PROMETHEUS_LOCAL_DIR/prometheus.pid
URL=http://127.0.0.1:$PROMETHEUS_LOCAL_PORT
if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
  if [ "$restart" = 1 ]; then
    bash "$HERE/scripts/prometheus-local-down.sh"
  else
    log "already running (pid $(cat "$PIDFILE")) at $URL"
    echo "$URL"
    exit 0
  fi
fi

promtool check config "$CONFIG" >"$PROMETHEUS_LOCAL_DIR/check.log" 2>&1 \
  || die "promtool refused $PROMETHEUS_LOCAL_CONFIG: $(cat "$PROMETHEUS_LOCAL_DIR/check.log")"
log "starting prometheus on $URL with $PROMETHEUS_LOCAL_CONFIG"
nohup prometheus \
  --config.file="$CONFIG" \
  --storage.tsdb.path="$PROMETHEUS_LOCAL_DIR/data" \
  --web.listen-address="127.0.0.1:$PROMETHEUS_LOCAL_PORT" \
  >"$PROMETHEUS_LOCAL_DIR/prometheus.log" 2>&1 </dev/null &
echo $! >"$PIDFILE"
for _ in $(seq $((PROMETHEUS_LOCAL_TIMEOUT * 10))); do
  if curl -fsS "$URL/-/ready" >/dev/null 2>&1; then
    echo "$URL"
    exit 0
  fi
  kill -0 "$(cat "$PIDFILE")" 2>/dev/null || die "prometheus ended: $(tail -5 "$PROMETHEUS_LOCAL_DIR/prometheus.log")"
  sleep 0.1
done
die "prometheus did not answer on $URL within ${PROMETHEUS_LOCAL_TIMEOUT}s"
