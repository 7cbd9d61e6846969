#!/usr/bin/env bash
# scripts/postgres-local-up.sh - start a local PostgreSQL (Debian's `postgresql` package) on
# loopback for astra's tests and development (`task postgres:up`; `task test` runs it first).
#
#   * installs `postgresql` with apt-get if pg_ctlcluster is missing (as root);
#   * uses the newest installed major version's cluster `main` (made with pg_createcluster if
#     missing), listening on localhost only, port $POSTGRES_LOCAL_PORT (default 5432);
#   * makes a role and a database for the tests: `astra`, password `astra`, allowed to create
#     databases (each test makes its own and drops it again);
#   * prints the URL astra takes: postgresql://astra:astra@127.0.0.1:5432/astra
#     (the tests read it from ASTRA_TEST_POSTGRES, with that as the default).
#
# Idempotent: a running cluster, an existing role and database are left as they are.
# Stop it with scripts/postgres-local-down.sh.
set -euo pipefail

: "${POSTGRES_LOCAL_PORT:=5432}"
: "${POSTGRES_LOCAL_ROLE:=astra}"
: "${POSTGRES_LOCAL_PASSWORD:=astra}"
: "${POSTGRES_LOCAL_DB:=astra}"
: "${POSTGRES_LOCAL_TIMEOUT:=60}"
export PATH=$PATH:/usr/sbin:/sbin

log() { printf '[postgres-local-up] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs and starts Debian's PostgreSQL)"

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  log "installing postgresql (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
fi

VERSION=$(ls /usr/lib/postgresql | sort -n | tail -1)
[ -n "$VERSION" ] || die "no PostgreSQL server under /usr/lib/postgresql"
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$VERSION main"; then
  log "creating cluster $VERSION main"
  pg_createcluster "$VERSION" main -p "$POSTGRES_LOCAL_PORT" -- --auth-local=peer --auth-host=scram-sha-256 >/dev/null
fi
CONF=/etc/postgresql/$VERSION/main/postgresql.conf
grep -q "^listen_addresses = 'localhost'" "$CONF" || echo "listen_addresses = 'localhost'" >>"$CONF"
PORT=$(pg_lsclusters -h | awk -v v="$VERSION" '$1==v && $2=="main" {print $3}')

if ! pg_lsclusters -h | awk -v v="$VERSION" '$1==v && $2=="main" {print $4}' | grep -q online; then
  log "starting cluster $VERSION main on 127.0.0.1:$PORT"
  pg_ctlcluster "$VERSION" main start
fi
for _ in $(seq "$POSTGRES_LOCAL_TIMEOUT"); do
  pg_isready -q -h 127.0.0.1 -p "$PORT" && break
  sleep 1
done
pg_isready -q -h 127.0.0.1 -p "$PORT" || die "PostgreSQL did not answer on 127.0.0.1:$PORT"

psql_() { su postgres -c "psql -q -v ON_ERROR_STOP=1 -p $PORT -tAc \"$1\""; }
if [ "$(psql_ "SELECT 1 FROM pg_roles WHERE rolname = '$POSTGRES_LOCAL_ROLE'")" != 1 ]; then
  log "creating role $POSTGRES_LOCAL_ROLE"
  psql_ "CREATE ROLE $POSTGRES_LOCAL_ROLE LOGIN CREATEDB PASSWORD '$POSTGRES_LOCAL_PASSWORD'"
fi
if [ "$(psql_ "SELECT 1 FROM pg_database WHERE datname = '$POSTGRES_LOCAL_DB'")" != 1 ]; then
  log "creating database $POSTGRES_LOCAL_DB"
  psql_ "CREATE DATABASE $POSTGRES_LOCAL_DB OWNER $POSTGRES_LOCAL_ROLE"
fi
echo "postgresql://$POSTGRES_LOCAL_ROLE:$POSTGRES_LOCAL_PASSWORD@127.0.0.1:$PORT/$POSTGRES_LOCAL_DB"
