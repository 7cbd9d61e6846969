#!/usr/bin/env bash
# scripts/age-install.sh - make sure this host has Debian's `age` (and `age-keygen`): the tests
# encrypt secrets with it as a user would (`task age:install`, and `task test` runs it first);
# astra itself decrypts with pyrage.
#
#   * installs `age` with apt-get if it is missing (as root; else says what to run).
#
# Idempotent: an installed age is left as it is. Nothing to stop: age is no service.
set -euo pipefail

log() { printf '[age-install] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if ! command -v age >/dev/null 2>&1 || ! command -v age-keygen >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "age is missing: install it as root (apt-get install age)"
  log "installing age (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends age >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends age >/dev/null; }
fi
log "$(age --version) is here"
