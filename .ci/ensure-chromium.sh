#!/usr/bin/env bash
# Make sure Debian's chromium is installed at /usr/bin/chromium for the
# browser tests (test/e2e/console.test.ts drives it with playwright-core).
# Only Debian's own package is used: no browser download by playwright.
# Safe to run repeatedly: nothing is installed when the binary is there.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
export DEBIAN_FRONTEND=noninteractive

log() { echo "[chromium] $*"; }

if [ -x "$CHROMIUM" ]; then
  log "already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

log "installing Debian's chromium package"
apt-get update -qq
apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 chromium >/dev/null
[ -x "$CHROMIUM" ] || { echo "[chromium] ERROR: ${CHROMIUM} missing after apt-get install chromium" >&2; exit 1; }
log "installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
