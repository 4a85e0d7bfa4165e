#!/usr/bin/env bash
# ha.sh — Sluice on a Patroni-managed Postgres cluster, on loopback.
#
#   scripts/ha.sh start [DIR]     etcd, three Patroni nodes of Postgres 15
#                                 (synchronous_mode), then Sluice: API + two
#                                 workers (make ha; DIR defaults to .data/ha)
#   scripts/ha.sh stop [DIR]      stop all of it (make ha-stop)
#   scripts/ha.sh cluster DIR     etcd and the Patroni nodes only, until a
#                                 leader and a synchronous standby are up
#                                 (cmd/sluice-faults uses it)
#   scripts/ha.sh url DIR [DB]    the multi-host DATABASE_URL of the cluster
#   scripts/ha.sh list DIR        patronictl list
#
# Ports, from HA_PORT (default 55400): etcd client +0 and peer +1; node N
# (1..3) Postgres +10+N and Patroni REST API +20+N; Sluice's API +30.
# HA_NODEn_ETCD and HA_NODEn_CONNECT (host:port), when set, are where node
# n's Patroni reaches etcd and where the other nodes reach node n's
# Postgres (its connect_address: replication): the fault suite puts a
# proxy of its own there to cut one node off (patroni-partition).
# Installs the Debian packages patroni and etcd-server when missing.
#
# One etcd member: on one box, three members would share its fate and
# only cost CPU; etcd is the DCS that Patroni's leader lock lives in, and
# what the demo and the fault scenarios exercise is Patroni and Sluice, not
# etcd's own failover. Production runs three (or five) etcd members on
# separate machines, so that the loss of one keeps a quorum
# (docs/patroni.md).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export PATH="$PATH:/usr/sbin:/sbin"
if [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi

log() { echo "ha.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

base=${HA_PORT:-55400}
etcd_port=$((base + 0)); etcd_peer=$((base + 1))
pg_port() { echo $((base + 10 + $1)); }
rest_port() { echo $((base + 20 + $1)); }
api_port=$((base + 30))
nodes=(1 2 3)

IS_ROOT=0; [[ $(id -u) -eq 0 ]] && IS_ROOT=1
# initdb refuses root: as root, etcd and Patroni (and so Postgres) run as
# the postgres OS user, as scripts/pg.sh runs Postgres.
as_owner() {
  if [[ $IS_ROOT -eq 1 ]]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

install_packages() {
  local missing=()
  command -v patroni >/dev/null 2>&1 || missing+=(patroni)
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo=""
  if [[ $IS_ROOT -eq 0 ]] && command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; fi
  log "installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    die "could not install ${missing[*]} (apt-get install ${missing[*]})"
}

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    [[ -x $d/initdb ]] && { echo "$d"; return; }
  done
  die "PostgreSQL server binaries not found (apt-get install postgresql-15)"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# node_via N WHAT DEFAULT: HA_NODE<N>_<WHAT> if set, else DEFAULT.
node_via() {
  local v="HA_NODE$1_$2"
  echo "${!v:-$3}"
}

# etcd_via N: with a proxy in front of etcd for node N, Patroni must keep
# to it rather than reach the members it lists directly.
etcd_via() {
  local v="HA_NODE$1_ETCD"
  if [[ -n ${!v:-} ]]; then echo "  use_proxies: true"; fi
}

# node_config DIR N: Patroni's configuration of node N.
node_config() {
  local dir=$1 n=$2
  cat <<EOF
scope: sluice-ha
name: node$n
log:
  # INFO: every loop and every step of a failover, with its time, so that
  # the fault scenarios' kept logs show where a handover's time went.
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  hosts: $(node_via "$n" ETCD "127.0.0.1:$etcd_port")
$(etcd_via "$n")
bootstrap:
  dcs:
    # The leader key lives ttl seconds unless renewed: a leader that stops
    # renewing it loses it after at most ttl, and a standby takes over.
    # loop_wait + 2 * retry_timeout must not exceed ttl.
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    # Every commit waits for a synchronous standby, and only that standby
    # may be promoted: no commit acknowledged to Sluice is lost at a failover.
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: $(node_via "$n" CONNECT "127.0.0.1:$(pg_port "$n")")
  data_dir: $dir/node$n/data
  bin_dir: $(pg_bindir)
  pgpass: $dir/node$n/pgpass
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: postgres, password: postgres}
  parameters:
    unix_socket_directories: $dir/node$n
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
EOF
}

# start_bg DIR NAME LOG CMD...: starts CMD in the background as the owner,
# in a session of its own, its pid in DIR/NAME.pid (setpriv execs, so the
# pid is CMD's own: the fault scenarios kill it).
start_bg() {
  local dir=$1 name=$2 logf=$3; shift 3
  if [[ $IS_ROOT -eq 1 ]]; then
    (cd / && exec setsid env HOME=/var/lib/postgresql USER=postgres LOGNAME=postgres \
      setpriv --reuid=postgres --regid=postgres --init-groups -- "$@") >>"$logf" 2>&1 < /dev/null &
  else
    (cd / && exec setsid "$@") >>"$logf" 2>&1 < /dev/null &
  fi
  echo $! > "$dir/$name.pid"
}

alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

rest() { curl -s -m 2 "http://127.0.0.1:$1$2"; }

# wait_cluster: a leader that takes writes and a synchronous standby.
wait_cluster() {
  local dir=$1 deadline=$((SECONDS + 120)) n out
  while ((SECONDS < deadline)); do
    for n in "${nodes[@]}"; do
      out=$(rest "$(rest_port "$n")" /cluster 2>/dev/null || true)
      if [[ $out == *'"role": "leader"'*'"role": "sync_standby"'* || $out == *'"role": "sync_standby"'*'"role": "leader"'* ]] &&
        [[ $out == *'"state": "running"'* ]]; then
        return 0
      fi
    done
    sleep 1
  done
  die "no leader and synchronous standby within 120s; logs in $dir"
}

cluster() {
  local dir=$1 n
  install_packages
  command -v curl >/dev/null 2>&1 || die "curl not found"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chmod 755 "$dir"
  # The postgres OS user must traverse every parent (as run.sh opens .data).
  local parent=$dir
  while parent=$(dirname "$parent"); [[ $parent != / ]]; do
    [[ $IS_ROOT -eq 1 && $parent == "$root"* ]] && chmod o+x "$parent"
  done
  for p in "$etcd_port" "$etcd_peer" $(for n in "${nodes[@]}"; do pg_port "$n"; rest_port "$n"; done); do
    port_free "$p" || die "port $p is in use (set HA_PORT to move every port)"
  done
  if [[ $IS_ROOT -eq 1 ]]; then chown postgres "$dir"; fi
  as_owner mkdir -p "$dir/etcd"
  start_bg "$dir" etcd "$dir/etcd.log" etcd --name ha --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "ha=http://127.0.0.1:$etcd_peer" --enable-v2=true
  local deadline=$((SECONDS + 30))
  until curl -s -m 1 "http://127.0.0.1:$etcd_port/health" | grep -q true; do
    ((SECONDS < deadline)) || die "etcd not healthy within 30s (log: $dir/etcd.log)"
    sleep 0.2
  done
  for n in "${nodes[@]}"; do
    as_owner mkdir -p "$dir/node$n"
    as_owner chmod 700 "$dir/node$n"
    node_config "$dir" "$n" | as_owner tee "$dir/node$n.yml" >/dev/null
    start_bg "$dir" "node$n" "$dir/node$n.log" patroni "$dir/node$n.yml"
    sleep 1 # node1 bootstraps first
  done
  wait_cluster "$dir"
  log "Patroni cluster up: $(url "$dir" postgres)"
}

url() {
  local db=${2:-sluice} hosts="" n
  for n in "${nodes[@]}"; do hosts+="${hosts:+,}127.0.0.1:$(pg_port "$n")"; done
  echo "postgres://postgres@$hosts/$db?sslmode=disable&target_session_attrs=read-write"
}

start() {
  local dir=$1
  if alive "$dir/etcd.pid"; then die "already running in $dir (make ha-stop first)"; fi
  cluster "$dir"
  dir=$(cd "$dir" && pwd)
  local dburl; dburl=$(url "$dir")
  psql "$(url "$dir" postgres)" -qAtc "CREATE DATABASE sluice" >/dev/null 2>&1 || true
  local bin=$dir/sluice
  log "building ./cmd/sluice"
  go build -o "$bin" ./cmd/sluice
  export DATABASE_URL=$dburl
  export SLUICE_ENCRYPTION_KEY=${SLUICE_ENCRYPTION_KEY:-$(head -c 32 /dev/urandom | base64)}
  export SLUICE_ALLOW_PRIVATE_TARGETS=${SLUICE_ALLOW_PRIVATE_TARGETS:-true}
  echo "$SLUICE_ENCRYPTION_KEY" > "$dir/encryption.key"; chmod 600 "$dir/encryption.key"
  "$bin" migrate
  "$bin" tenant create --name demo --alert-email demo@example.com > "$dir/demo.json"
  local api_key; api_key=$(sed -n 's/.*"api_key"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/demo.json" | head -n 1)
  SLUICE_ADDR=127.0.0.1:$api_port setsid "$bin" serve --api --dashboard >>"$dir/api.log" 2>&1 < /dev/null &
  echo $! > "$dir/api.pid"
  for w in 1 2; do
    setsid "$bin" serve --worker >>"$dir/worker$w.log" 2>&1 < /dev/null &
    echo $! > "$dir/worker$w.pid"
  done
  local deadline=$((SECONDS + 30))
  until curl -s -m 1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$api_port/readyz" | grep -q 200; do
    ((SECONDS < deadline)) || die "Sluice not ready within 30s (log: $dir/api.log)"
    sleep 0.2
  done
  local rest_urls="" n
  for n in "${nodes[@]}"; do rest_urls+=" node$n http://127.0.0.1:$(rest_port "$n")"; done
  cat <<EOF

  Sluice on a Patroni cluster (logs and data in $dir)
    API and dashboard: http://127.0.0.1:$api_port/   (API key: $api_key)
    workers:           2 (worker1.log, worker2.log)
    DATABASE_URL:      $dburl
    Patroni REST:     $rest_urls
    etcd:              http://127.0.0.1:$etcd_port (one member)
    cluster state:     bash scripts/ha.sh list $dir
    switch over:       patronictl -c $dir/node1.yml switchover --candidate <the Sync Standby> --force
    stop it all:       make ha-stop   (bash scripts/ha.sh stop $dir)

EOF
}

stop() {
  local dir=$1 f pid
  [[ -d $dir ]] || { log "nothing in $dir"; return 0; }
  # Sluice first, then the Patroni nodes (each stops its Postgres), etcd last.
  for f in api worker1 worker2 node3 node2 node1 etcd; do
    [[ -s $dir/$f.pid ]] || continue
    pid=$(cat "$dir/$f.pid")
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/$f.pid"
  done
  # A Postgres whose Patroni was killed outlives it.
  local n
  for n in "${nodes[@]}"; do
    if [[ -s $dir/node$n/data/postmaster.pid ]]; then
      as_owner "$(pg_bindir)/pg_ctl" stop -D "$dir/node$n/data" -m immediate -w >/dev/null 2>&1 || true
    fi
  done
  log "stopped (data left in $dir; delete it for a fresh cluster)"
}

cmd=${1:-}; shift || true
case $cmd in
  start) start "${1:-$root/.data/ha}" ;;
  stop) stop "${1:-$root/.data/ha}" ;;
  cluster) [[ $# -ge 1 ]] || usage; cluster "$1" ;;
  url) [[ $# -ge 1 ]] || usage; url "$@" ;;
  list) [[ $# -ge 1 ]] || usage; patronictl -c "$1/node1.yml" list ;;
  *) usage ;;
esac
