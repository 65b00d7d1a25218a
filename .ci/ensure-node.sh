#!/usr/bin/env bash
# Node.js of a supported major beside the machine's own, for the suites .ci/run
# spreads over the majors. The npm registry serves Node itself (the `node`
# package, whose install fetches the official build), so nothing but npm is
# needed. Prints the folder to put first on PATH; the messages go to stderr.
# Safe to run repeatedly: an installed version is kept.
#   .ci/ensure-node.sh 22   ->   /tmp/rpc-service-node/22.23.3/node_modules/node/bin
set -euo pipefail

MAJOR="${1:?usage: ensure-node.sh <major>}"
case "$MAJOR" in
  22) VERSION=22.23.3 ;;
  24) VERSION=24.21.0 ;;
  *) echo "[node] no pinned version for major ${MAJOR}" >&2; exit 2 ;;
esac
DIR="${TMPDIR:-/tmp}/rpc-service-node/${VERSION}"
BIN="${DIR}/node_modules/node/bin"
log() { echo "[node] $*" >&2; }

if [ "$("${BIN}/node" --version 2>/dev/null)" != "v${VERSION}" ]; then
  log "installing node@${VERSION} from the npm registry into ${DIR}"
  rm -rf "$DIR"
  mkdir -p "$DIR"
  npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error "node@${VERSION}" >&2
fi
# npm run by this node reads its global settings beside it (<prefix>/etc/npmrc): carry over the certificate
# authorities the machine's npm is set to trust, so the registry answers it as it answers the machine's own.
CAFILE="$(npm config get cafile)"
if [ "$CAFILE" != "null" ] && [ -n "$CAFILE" ]; then
  mkdir -p "${BIN}/../etc"
  echo "cafile=${CAFILE}" > "${BIN}/../etc/npmrc"
fi
log "$("${BIN}/node" --version) at ${BIN}"
echo "$BIN"
