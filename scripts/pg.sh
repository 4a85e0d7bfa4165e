#!/usr/bin/env bash
# pg.sh — manage a private PostgreSQL cluster living in one directory.
#
#   scripts/pg.sh start    DIR PORT     initdb if needed, then start (idempotent)
#   scripts/pg.sh stop     DIR          fast shutdown if running (idempotent)
#   scripts/pg.sh status   DIR          exit 0 if running, 3 if not
#   scripts/pg.sh url      DIR PORT DB  print the connection URL
#   scripts/pg.sh createdb DIR PORT DB  create database DB if missing
#   scripts/pg.sh psql     DIR PORT [DB] [psql args...]
#
# Layout of DIR:
#   DIR/data/          the cluster (PGDATA)
#   DIR/postgres.log   server log
#   DIR/.s.PGSQL.PORT  unix socket (unix_socket_directories = DIR)
#
# The server listens on 127.0.0.1:PORT only, trusts local and loopback
# connections, and its superuser is "postgres". When run as root, the cluster
# is owned by and runs as the "postgres" OS user (initdb refuses root).
#
# Exit codes: 0 ok, 1 error, 2 usage, 3 not running (status) or port already
# in use (start), so callers can retry on another port.
set -euo pipefail

PG_OS_USER=postgres
PG_SUPERUSER=postgres

die() { echo "pg.sh: $*" >&2; exit 1; }
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# --- locate the server binaries -------------------------------------------
find_bindir() {
  local d
  if [[ -n "${PG_BINDIR:-}" ]]; then
    [[ -x "$PG_BINDIR/initdb" ]] || die "PG_BINDIR=$PG_BINDIR has no initdb"
    echo "$PG_BINDIR"; return
  fi
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return; fi
  fi
  # Newest installed major version (Debian/Ubuntu layout).
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n "$d" && -x "$d/initdb" ]]; then echo "$d"; return; fi
  for d in /usr/local/pgsql/bin /usr/pgsql-*/bin; do
    if [[ -x "$d/initdb" ]]; then echo "$d"; return; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  die "PostgreSQL server binaries (initdb, pg_ctl) not found; install the Debian package 'postgresql' or set PG_BINDIR"
}

# runuser lives in /usr/sbin, which is often not on a non-root-style PATH.
PATH="$PATH:/usr/sbin:/sbin"
BINDIR=$(find_bindir)
IS_ROOT=0; [[ $(id -u) -eq 0 ]] && IS_ROOT=1
if [[ $IS_ROOT -eq 1 ]] && ! command -v runuser >/dev/null 2>&1; then
  die "running as root needs 'runuser' (package util-linux) to run Postgres as the '$PG_OS_USER' user"
fi

# Run a server-side command as the cluster owner (postgres when we are root).
# cd / first so the postgres user never complains about an unreadable cwd.
as_owner() {
  if [[ $IS_ROOT -eq 1 ]]; then
    (cd / && runuser -u "$PG_OS_USER" -- "$@")
  else
    "$@"
  fi
}

# Connection environment for client tools: ignore whatever PG* the caller has.
clean_pg_env() {
  unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGPASSFILE \
        PGSERVICE PGSERVICEFILE PGOPTIONS PGSSLMODE PGDATA PGTZ PGCONNECT_TIMEOUT || true
}
clean_pg_env

abs_dir() {  # absolute path of $1 (need not exist)
  local p=$1
  [[ $p == /* ]] || p="$PWD/$p"
  # normalise without requiring existence
  if command -v realpath >/dev/null 2>&1; then realpath -m -- "$p"; else echo "$p"; fi
}

check_port() {
  [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 && $1 < 65536 )) || die "invalid port: $1"
}

is_running() {  # DIR
  [[ -f "$1/data/PG_VERSION" ]] || return 1
  as_owner "$BINDIR/pg_ctl" status -D "$1/data" >/dev/null 2>&1
}

running_port() {  # DIR -> port from postmaster.pid (line 4)
  sed -n '4p' "$1/data/postmaster.pid" 2>/dev/null || true
}

# Make sure the postgres OS user can reach and own DIR (root only).
prepare_dir_for_owner() {
  local dir=$1
  [[ $IS_ROOT -eq 1 ]] || return 0
  id -u "$PG_OS_USER" >/dev/null 2>&1 \
    || die "running as root but OS user '$PG_OS_USER' does not exist (install the 'postgresql' package or run as a normal user)"
  # Every ancestor must be traversable by the postgres user.
  local p=$dir
  while [[ $p != / ]]; do
    p=$(dirname "$p")
    if ! runuser -u "$PG_OS_USER" -- test -x "$p" 2>/dev/null; then
      die "the '$PG_OS_USER' user cannot traverse $p (mode $(stat -c %A "$p")), so it cannot run a cluster in $dir.
  Fix: chmod o+x $p   (or put the cluster in a traversable directory, or set DATABASE_URL)"
    fi
  done
  chown "$PG_OS_USER": "$dir"
  if [[ -d "$dir/data" ]]; then
    chown -R "$PG_OS_USER": "$dir/data"
  fi
  if [[ -e "$dir/postgres.log" ]]; then chown "$PG_OS_USER": "$dir/postgres.log"; fi
  runuser -u "$PG_OS_USER" -- test -w "$dir" \
    || die "the '$PG_OS_USER' user cannot write to $dir"
}

sql_quote() { printf "'%s'" "${1//\'/\'\'}"; }

cmd_start() {
  [[ $# -eq 2 ]] || usage
  local dir port
  dir=$(abs_dir "$1"); port=$2; check_port "$port"

  if is_running "$dir"; then
    local rp; rp=$(running_port "$dir")
    if [[ -n "$rp" && "$rp" != "$port" ]]; then
      echo "pg.sh: cluster in $dir is already running on port $rp (not $port); leaving it alone" >&2
    fi
    return 0
  fi

  local sock="$dir/.s.PGSQL.$port"
  (( ${#sock} < 107 )) || die "socket path too long for a unix socket (${#sock} bytes): $sock; use a shorter DIR"

  mkdir -p "$dir"
  prepare_dir_for_owner "$dir"

  local data="$dir/data" log="$dir/postgres.log"
  if [[ ! -f "$data/PG_VERSION" ]]; then
    if [[ -d "$data" ]] && [[ -n "$(ls -A "$data" 2>/dev/null)" ]]; then
      die "$data exists, is not empty and holds no cluster; remove it first"
    fi
    local locale_args=(--no-locale)
    if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then locale_args=(--locale=C.UTF-8); fi
    echo "pg.sh: initialising cluster in $data ($("$BINDIR/postgres" --version 2>/dev/null || echo postgres))" >&2
    if ! as_owner "$BINDIR/initdb" -D "$data" -U "$PG_SUPERUSER" -E UTF8 "${locale_args[@]}" \
          --auth-local=trust --auth-host=trust >"$dir/initdb.log" 2>&1; then
      cat "$dir/initdb.log" >&2
      die "initdb failed"
    fi
    # Our settings live in sluice.conf, rewritten on every start.
    printf "\n# added by scripts/pg.sh\ninclude_if_exists = 'sluice.conf'\n" \
      | as_owner tee -a "$data/postgresql.conf" >/dev/null
  fi

  as_owner tee "$data/sluice.conf" >/dev/null <<EOF
# Written by scripts/pg.sh on every start; edits are overwritten.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = $(sql_quote "$dir")
max_connections = 200
shared_buffers = 256MB
# Checkpoints no more often than every checkpoint_timeout (5 min): at the
# default 1GB, a load of a few thousand events/s forces one every minute
# or so, and the full-page images written after each slow every commit
# (README, "Postgres settings").
max_wal_size = 8GB
fsync = on
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
log_min_duration_statement = -1
${SLUICE_PG_EXTRA_CONF:-}
EOF

  as_owner touch "$log"
  local before; before=$(stat -c %s "$log")
  if ! as_owner "$BINDIR/pg_ctl" start -w -t 120 -D "$data" -l "$log" >/dev/null 2>&1; then
    local new; new=$(tail -c +"$((before + 1))" "$log" 2>/dev/null || true)
    # A failed start may still leave a postmaster behind (e.g. wait timeout).
    stop_dir "$dir" >/dev/null 2>&1 || true
    if grep -qE 'could not bind|Address already in use|could not create any TCP/IP sockets' <<<"$new"; then
      echo "pg.sh: port $port on 127.0.0.1 is in use" >&2
      exit 3
    fi
    printf '%s\n' "$new" | tail -n 30 >&2
    die "could not start the cluster in $dir (log: $log)"
  fi
  echo "pg.sh: cluster in $dir running on 127.0.0.1:$port" >&2
}

stop_dir() {  # DIR (absolute)
  local dir=$1 data="$1/data"
  [[ -f "$data/PG_VERSION" ]] || return 0
  if is_running "$dir"; then
    if ! as_owner "$BINDIR/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null 2>&1; then
      as_owner "$BINDIR/pg_ctl" stop -D "$data" -m immediate -w -t 30 >/dev/null 2>&1 || true
    fi
  fi
  # Last resort: the postmaster pid we started is still alive.
  local pid
  pid=$(sed -n '1p' "$data/postmaster.pid" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
     && [[ $(readlink "/proc/$pid/cwd" 2>/dev/null || true) == "$data" ]]; then
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
}

cmd_stop() {
  [[ $# -eq 1 ]] || usage
  local dir; dir=$(abs_dir "$1")
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    return 0
  fi
  if is_running "$dir"; then
    stop_dir "$dir"
    echo "pg.sh: cluster in $dir stopped" >&2
  else
    stop_dir "$dir"   # clean up anything stale; no-op normally
  fi
}

cmd_status() {
  [[ $# -eq 1 ]] || usage
  local dir; dir=$(abs_dir "$1")
  if is_running "$dir"; then
    echo "running on 127.0.0.1:$(running_port "$dir") (data: $dir/data)"
  else
    echo "not running (data: $dir/data)"; exit 3
  fi
}

cmd_url() {
  [[ $# -eq 3 ]] || usage
  check_port "$2"
  echo "postgres://$PG_SUPERUSER@127.0.0.1:$2/$3?sslmode=disable"
}

psql_bin() {
  if [[ -x "$BINDIR/psql" ]]; then echo "$BINDIR/psql"
  elif command -v psql >/dev/null 2>&1; then command -v psql
  else die "psql not found"; fi
}

cmd_createdb() {
  [[ $# -eq 3 ]] || usage
  local dir port=$2 db=$3 psql
  dir=$(abs_dir "$1"); check_port "$port"; psql=$(psql_bin)
  local q=(-X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d postgres -tA)
  local exists
  exists=$("$psql" "${q[@]}" -c "select 1 from pg_database where datname = $(sql_quote "$db")") \
    || die "cannot connect to 127.0.0.1:$port (is the cluster in $dir running?)"
  [[ $exists == 1 ]] && return 0
  local ident="\"${db//\"/\"\"}\""
  if ! "$psql" "${q[@]}" -c "create database $ident" >/dev/null; then
    # Lost a race with a concurrent creator? Then it exists now.
    exists=$("$psql" "${q[@]}" -c "select 1 from pg_database where datname = $(sql_quote "$db")" || true)
    [[ $exists == 1 ]] || die "could not create database $db"
  fi
  echo "pg.sh: created database $db" >&2
}

cmd_psql() {
  [[ $# -ge 2 ]] || usage
  local port=$2 db=${3:-postgres}
  check_port "$port"
  shift 2; [[ $# -gt 0 ]] && shift
  exec "$(psql_bin)" -h 127.0.0.1 -p "$port" -U "$PG_SUPERUSER" -d "$db" "$@"
}

[[ $# -ge 1 ]] || usage
cmd=$1; shift
case $cmd in
  start)    cmd_start "$@" ;;
  stop)     cmd_stop "$@" ;;
  status)   cmd_status "$@" ;;
  url)      cmd_url "$@" ;;
  createdb) cmd_createdb "$@" ;;
  psql)     cmd_psql "$@" ;;
  bindir)   echo "$BINDIR" ;;
  -h|--help|help) usage ;;
  *) echo "pg.sh: unknown command: $cmd" >&2; usage ;;
esac
