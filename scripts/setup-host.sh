#!/bin/sh
# Installs the Debian packages the local sandbox driver and its base image need (python3, python3-venv
# and python3-pip also serve Python graphs and the Python client tests), and wrk and h2load,
# the egress benchmark's load generators, and HAProxy and Redis for the replica tests (test/scale/). Idempotent; run as root (CI calls it from .ci/run). The
# platform checks the sandbox packages at start and names the missing ones when a sandbox is created
# on a host that did not run this.
set -eu
PACKAGES="bubblewrap util-linux mount iproute2 perl-base tar zstd dpkg bash coreutils python3 curl ca-certificates mawk debianutils sensible-utils python3-pip python3-venv git less xz-utils netbase skopeo umoci docker-registry wrk nghttp2-client haproxy redis-server redis-sentinel"
# Test-only peers: the console's browser tests drive Debian's Chromium, and the image tests pull from
# Debian's docker-registry on loopback; only CI (and WHARF_BROWSER_TESTS=1) needs them.
if [ "${CI:-}" = true ] || [ "${WHARF_BROWSER_TESTS:-}" = 1 ]; then PACKAGES="$PACKAGES chromium docker-registry"; fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-host.sh: run as root (it installs: $PACKAGES)" >&2
  exit 1
fi
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup-host.sh: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
fi
# The sandbox root mount point (used only inside each sandbox's private mount namespace).
mkdir -p /run/wharf-sandbox-root
echo "setup-host.sh: sandbox host ready ($(bwrap --version))"
