#!/usr/bin/env bash
# PgBouncer (Debian's package, 1.18) in transaction mode on 127.0.0.1:6432, in
# front of the local PostgreSQL on 5432, for the test run through a pooler
# (.ci/run). Every database name is passed through (a wildcard entry), so the
# scratch databases the tests make are reached too. Trust auth, as the local
# server's. Safe to run repeatedly: an answering PgBouncer is left as it is.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
PORT="${PGBOUNCER_PORT:-6432}"
DIR=/tmp/pgbouncer-ci
log() { echo "[pgbouncer] $*"; }

if pg_isready -q -h 127.0.0.1 -p "$PORT" 2>/dev/null; then
  log "already answering on ${PORT}"
  exit 0
fi

if ! command -v pgbouncer >/dev/null; then
  log "installing Debian's pgbouncer package"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 pgbouncer >/dev/null
fi

mkdir -p "$DIR"
cat > "$DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${PORT}
unix_socket_dir =
auth_type = trust
auth_file = ${DIR}/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
max_db_connections = 80
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = ${DIR}/pgbouncer.log
pidfile = ${DIR}/pgbouncer.pid
INI
echo '"postgres" ""' > "$DIR/userlist.txt"
# PgBouncer refuses to run as root; the package's postgres user runs it.
chown -R postgres "$DIR"
su postgres -s /bin/sh -c "pgbouncer -d $DIR/pgbouncer.ini"
for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p "$PORT" && break; sleep 0.1; done
pg_isready -h 127.0.0.1 -p "$PORT" >/dev/null || { echo "[pgbouncer] ERROR: not answering on ${PORT}; see ${DIR}/pgbouncer.log" >&2; exit 1; }
log "transaction mode on 127.0.0.1:${PORT} ($(pgbouncer --version | head -1))"
