#!/usr/bin/env bash
# scripts/sandbox-local-up.sh - make sure this host can run astra's workers in a sandbox:
# bubblewrap (Debian's `bubblewrap` package; `task sandbox:up`, and `task test` runs it first),
# libseccomp (`libseccomp2`: the workers' seccomp filter) and setpriv (`util-linux`: a root
# server's workers switch to the worker user, `nobody`, with it).
#
#   * installs `bubblewrap`, `libseccomp2` and `util-linux` with apt-get where missing (as
#     root; else says what to run);
#   * checks that a sandbox can be made (a PID namespace, and a user namespace when not root):
#     on a host whose unprivileged user namespaces are off, says so and how to turn them on.
#
# Idempotent: an installed bwrap is left as it is. Nothing to stop: bwrap is no service.
set -euo pipefail

log() { printf '[sandbox-local-up] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "${missing[*]} missing: install as root (apt-get install ${missing[*]})"
  log "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi

user_ns=()
[ "$(id -u)" = 0 ] || user_ns=(--unshare-user)
if ! bwrap "${user_ns[@]}" --unshare-pid --die-with-parent --ro-bind / / --proc /proc --dev /dev true; then
  die "bwrap cannot make a sandbox here: are user namespaces on? (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)"
fi
log "bwrap $(bwrap --version | awk '{print $2}') makes sandboxes here"
