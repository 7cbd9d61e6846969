#!/usr/bin/env bash
# scripts/browser-install.sh - install the real browser the console's tests drive: Debian's
# `chromium` package (`task browser:install`; `task test` runs it first).
#
#   * installs `chromium` with apt-get if /usr/bin/chromium is missing (as root);
#   * playwright (a test dependency, from PyPI) drives it through `executable_path`: no browser
#     is ever downloaded (`playwright install` is not used; these machines may have no internet
#     but Debian's mirror);
#   * prints the browser's path, which the tests read from ASTRA_TEST_CHROMIUM (that as default).
#
# Idempotent: an installed chromium is left as it is.
set -euo pipefail

: "${ASTRA_TEST_CHROMIUM:=/usr/bin/chromium}"

log() { printf '[browser-install] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ ! -x "$ASTRA_TEST_CHROMIUM" ]; then
  [ "$(id -u)" = 0 ] || die "must run as root to install Debian's chromium (or set ASTRA_TEST_CHROMIUM)"
  log "installing chromium (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null; }
fi
[ -x "$ASTRA_TEST_CHROMIUM" ] || die "no browser at $ASTRA_TEST_CHROMIUM"
"$ASTRA_TEST_CHROMIUM" --version >&2 || die "$ASTRA_TEST_CHROMIUM does not start"
echo "$ASTRA_TEST_CHROMIUM"
