#!/usr/bin/env bash
# Make sure the local PostgreSQL 15 (Debian 12) runs and has the pgvector
# extension ("CREATE EXTENSION vector").
#
# Debian 12 ships no pgvector binary package for PostgreSQL 15, so this builds
# it from Debian's own source package (trixie), fetched through a deb-src-only
# entry: no trixie binary package is ever installed. Safe to run repeatedly:
# when "vector" is already available, nothing is built.
set -euo pipefail

PG_MAJOR=15
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"
PG_HOST=127.0.0.1
PG_PORT=5432
PG_WAIT_SECONDS=60
SRC_SUITE=trixie
SRC_LIST=/etc/apt/sources.list.d/pgvector-trixie-src.sources
# Same mirror host as the configured bookworm entries (debian.sources).
SRC_URI=http://deb.debian.org/debian

export DEBIAN_FRONTEND=noninteractive
export PGCONNECT_TIMEOUT=5

log() { echo "[pgvector] $*"; }
die() { echo "[pgvector] ERROR: $*" >&2; exit 1; }

# Run a noisy command with its output in a log file; show the tail on failure.
quiet() {
  local what=$1; shift
  local out
  out=$(mktemp)
  if ! "$@" >"$out" 2>&1; then
    echo "[pgvector] ERROR: ${what} failed: $*" >&2
    tail -n 40 "$out" >&2
    rm -f "$out"
    exit 1
  fi
  rm -f "$out"
}

psql_q() { PGOPTIONS="-c client_min_messages=warning" psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d "${2:-test}" -v ON_ERROR_STOP=1 -qtAc "$1"; }

vector_available() {
  [ "$(psql_q "select 1 from pg_available_extensions where name='vector'" 2>/dev/null)" = "1" ]
}

# --- 1. PostgreSQL running -------------------------------------------------
if pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; then
  log "PostgreSQL is accepting connections on ${PG_HOST}:${PG_PORT}"
else
  log "PostgreSQL not ready; starting cluster $(ls /etc/postgresql) main"
  # shellcheck disable=SC2046
  pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start \
    || log "pg_ctlcluster start returned non-zero; waiting anyway"
  waited=0
  until pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; do
    if [ "$waited" -ge "$PG_WAIT_SECONDS" ]; then
      pg_lsclusters >&2 || true
      die "PostgreSQL did not accept connections on ${PG_HOST}:${PG_PORT} within ${PG_WAIT_SECONDS}s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "PostgreSQL ready after ${waited}s"
fi

# --- 2./3. Build pgvector unless already available -------------------------
if vector_available; then
  log "vector extension already available; skipped build"
else
  log "vector extension not available; building from Debian source package (${SRC_SUITE})"

  # deb-src only: gives access to trixie *source* packages, never binaries.
  want_list="Types: deb-src
URIs: ${SRC_URI}
Suites: ${SRC_SUITE}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
  if [ ! -f "$SRC_LIST" ] || [ "$(cat "$SRC_LIST")" != "$want_list" ]; then
    printf '%s\n' "$want_list" >"$SRC_LIST"
    log "wrote ${SRC_LIST} (deb-src ${SRC_SUITE} only)"
  fi

  log "apt-get update"
  quiet "apt-get update" apt-get update -qq
  log "installing build deps (postgresql-server-dev-${PG_MAJOR}, build-essential, dpkg-dev)"
  quiet "apt-get install" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Use-Pty=0 "postgresql-server-dev-${PG_MAJOR}" build-essential dpkg-dev
  [ -x "$PG_CONFIG" ] || die "${PG_CONFIG} missing after installing postgresql-server-dev-${PG_MAJOR}"

  work=$(mktemp -d /tmp/pgvector-build.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  # Let apt's unprivileged _apt user write the download (avoids a root warning).
  if id _apt >/dev/null 2>&1; then chown _apt "$work"; fi

  log "apt-get source pgvector/${SRC_SUITE}"
  (cd "$work" && quiet "apt-get source" apt-get source -qq --only-source "pgvector/${SRC_SUITE}")
  srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)
  [ -n "$srcdir" ] && [ -f "$srcdir/Makefile" ] || die "no pgvector source tree found in ${work}"
  log "source: $(basename "$srcdir")"

  start=$(date +%s)
  log "make (PG_CONFIG=${PG_CONFIG})"
  quiet "make" make -C "$srcdir" -j"$(nproc)" PG_CONFIG="$PG_CONFIG"
  log "make install"
  quiet "make install" make -C "$srcdir" install PG_CONFIG="$PG_CONFIG"
  log "built and installed in $(($(date +%s) - start))s"

  rm -rf "$work"
  trap - EXIT
fi

# --- 4. Verify ---------------------------------------------------------------
vector_available || die "vector is still not listed in pg_available_extensions"

check_db="pgvector_check_$$"
psql_q "drop database if exists ${check_db}" >/dev/null
psql_q "create database ${check_db}" >/dev/null || die "could not create throwaway database ${check_db}"
if ! ver=$(psql_q "create extension if not exists vector; select extversion from pg_extension where extname='vector'" "$check_db" 2>&1); then
  psql_q "drop database if exists ${check_db}" >/dev/null || true
  die "CREATE EXTENSION vector failed: ${ver}"
fi
psql_q "drop database if exists ${check_db}" >/dev/null || true
log "OK: CREATE EXTENSION vector works (version ${ver})"
