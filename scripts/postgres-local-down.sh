#!/usr/bin/env bash
# scripts/postgres-local-down.sh - stop the local PostgreSQL that scripts/postgres-local-up.sh
# started (the newest installed version's cluster `main`). Its data (the test role and
# database) stays; `--purge` also drops the tests' role and databases first.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin
command -v pg_ctlcluster >/dev/null 2>&1 || exit 0
VERSION=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
[ -n "$VERSION" ] || exit 0
state=$(pg_lsclusters -h | awk -v v="$VERSION" '$1==v && $2=="main" {print $4}')
case "$state" in
  online*)
    if [ "${1:-}" = --purge ]; then
      port=$(pg_lsclusters -h | awk -v v="$VERSION" '$1==v && $2=="main" {print $3}')
      for db in $(su postgres -c "psql -p $port -tAc \"SELECT datname FROM pg_database WHERE datname LIKE 'astra%'\""); do
        su postgres -c "psql -q -p $port -c 'DROP DATABASE \"$db\"'"
      done
      su postgres -c "psql -q -p $port -c 'DROP ROLE IF EXISTS astra'"
    fi
    pg_ctlcluster "$VERSION" main stop
    ;;
esac
