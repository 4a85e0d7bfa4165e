#!/usr/bin/env bash
# restore-drill.sh — back Sluice up and restore it, as docs/backup.md says,
# checked end to end.
#
#   bash scripts/restore-drill.sh
#
# Starts a private Postgres cluster on loopback (scripts/pg.sh) with a role
# "sluice" owning a database "sluice", a receiver on loopback that checks
# each delivery's signature, and Sluice (an API process and a worker). Posts
# events that are delivered, stops the worker, posts events that stay
# queued, and takes a backup with docs/backup.md's backup block while the
# API runs. Stops Sluice and the cluster, starts a fresh cluster, runs
# docs/backup.md's database and restore blocks on it, starts Sluice on the
# restored database with the same key, and checks: every event is listed,
# the deliveries made before the backup are not sent again, the queued ones
# are delivered, the old API key signs in to the dashboard, new posts are
# delivered, every delivery is signed with the endpoint's secret and each
# webhook-id arrives once. Everything it starts is stopped when it ends.
# Each wait is bounded, and the whole drill by RESTORE_DRILL_LIMIT seconds
# (default 600). Exit status 0: the drill passed; 1: it failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "restore-drill: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

if [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi
export PATH="$PATH:/usr/sbin:/sbin"
command -v go >/dev/null 2>&1 || fail "go not found"
command -v curl >/dev/null 2>&1 || fail "curl not found"
command -v openssl >/dev/null 2>&1 || fail "openssl not found"
pgbin=$(bash scripts/pg.sh bindir) || fail "the PostgreSQL server binaries were not found (scripts/pg.sh bindir)"
for tool in pg_dump pg_restore createuser createdb; do
  [[ -x $pgbin/$tool ]] || fail "$pgbin/$tool not found"
done

limit=${RESTORE_DRILL_LIMIT:-600}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-restore-drill.XXXXXX")
chmod 755 "$tmp" # the clusters run as the postgres user when this runs as root
mkdir -p "$tmp/bin" "$tmp/work"
# The blocks of docs/backup.md find pg_dump, pg_restore, createuser,
# createdb and sluice on PATH, as on an operator's machine.
export PATH="$tmp/bin:$pgbin:$PATH"
unset PGHOST PGHOSTADDR PGPORT PGDATABASE PGUSER PGPASSWORD PGSERVICE PGOPTIONS PGSSLMODE || true

pids=()
clusters=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for dir in "${clusters[@]}"; do bash scripts/pg.sh stop "$dir" >/dev/null 2>&1 || true; done
  if [[ $rc -ne 0 ]]; then
    for f in "$tmp"/*.log; do
      [[ -s $f ]] && { log "--- last lines of $f"; tail -n 20 "$f" >&2; }
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# wait_for WHAT CMD...: run CMD until it succeeds, 0.2 s apart, at most 60 s
# and never past the drill's limit.
wait_for() {
  local what=$1 i
  shift
  for ((i = 0; i < 300; i++)); do
    "$@" && return 0
    ((SECONDS < limit)) || fail "the drill's limit (${limit}s) passed waiting for $what"
    sleep 0.2
  done
  fail "waited 60 s for $what"
}

# stop PID: SIGTERM, then wait for it at most 30 s (Sluice stops gracefully).
stop() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.2
  done
  fail "process $pid did not stop within 30 s of SIGTERM"
}

# block NAME: the shell block of docs/backup.md marked for the drill as NAME.
block() {
  local b
  b=$(awk -v name="$1" '$0 == "<!-- restore-drill: " name " -->" { marked = 1; next }
    marked && /^```sh/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }' docs/backup.md)
  [[ -n $b ]] || fail "no shell block marked '<!-- restore-drill: $1 -->' in docs/backup.md"
  printf '%s\n' "$b"
}

# Read first, so that a page without them fails the drill at once.
backup_block=$(block backup)
database_block=$(block database)
restore_block=$(block restore)

# cluster DIR: a fresh Postgres cluster in DIR on a free loopback port, with
# the role sluice owning the database sluice made by docs/backup.md's
# database block. Its port is in $cluster_port.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
cluster() {
  local dir=$1 base=${RESTORE_DRILL_PG_PORT:-55700} p rc
  for ((p = base; p < base + 200; p++)); do
    port_busy "$p" && continue
    rc=0
    bash scripts/pg.sh start "$dir" "$p" 2>"$tmp/pg-start.err" || rc=$?
    if [[ $rc -eq 0 ]]; then
      clusters+=("$dir")
      # As a superuser of the new server, as the page says.
      (export PGHOST=127.0.0.1 PGPORT=$p PGUSER=postgres && eval "$database_block") >"$tmp/pg-database.log" 2>&1 ||
        { cat "$tmp/pg-database.log" >&2; fail "docs/backup.md's database block failed on 127.0.0.1:$p"; }
      cluster_port=$p
      return 0
    fi
    [[ $rc -eq 3 ]] || { cat "$tmp/pg-start.err" >&2; fail "could not start a cluster in $dir"; }
  done
  fail "no free port for a cluster in $base..$((base + 199))"
}

# --- Sluice and the receiver -------------------------------------------------
log "building ./cmd/sluice and the receiver"
go build -o "$tmp/bin/sluice" ./cmd/sluice

mkdir -p "$tmp/receiver"
cat >"$tmp/receiver/main.go" <<'EOF'
// The drill's receiver: checks each delivery's Standard Webhooks signature
// with the secret in the file -secret (read at each request), counts each
// webhook-id, and answers GET /stats with "distinct=N total=N bad=N".
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
)

func main() {
	secretFile := flag.String("secret", "", "file holding the endpoint's whsec_ secret")
	addrFile := flag.String("addr", "", "file to write the listening address to")
	flag.Parse()
	var mu sync.Mutex
	seen := map[string]int{}
	total, bad := 0, 0
	http.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		raw, err := os.ReadFile(*secretFile)
		if err != nil {
			http.Error(w, "no secret yet", http.StatusServiceUnavailable)
			return
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(string(raw)), "whsec_"))
		if err != nil {
			http.Error(w, "bad secret", http.StatusInternalServerError)
			return
		}
		id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "." + string(body)))
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		valid := false
		for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
			valid = valid || hmac.Equal([]byte(sig), []byte(want))
		}
		mu.Lock()
		defer mu.Unlock()
		if !valid {
			bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		seen[id]++
		total++
		w.WriteHeader(http.StatusNoContent)
	})
	http.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "distinct=%d total=%d bad=%d\n", len(seen), total, bad)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.Serve(ln, nil))
}
EOF
(cd "$tmp/receiver" && GOFLAGS= go build -o "$tmp/bin/receiver" main.go) || fail "could not build the receiver"
"$tmp/bin/receiver" -secret "$tmp/secret" -addr "$tmp/receiver.addr" >"$tmp/receiver.log" 2>&1 &
pids+=($!)
wait_for "the receiver to listen" test -s "$tmp/receiver.addr"
receiver=$(cat "$tmp/receiver.addr")

key=$(openssl rand -base64 32)
# sluice_start NAME ARGS...: start `sluice serve ARGS` against DATABASE_URL,
# logging to $tmp/NAME.log; its pid is in $last_pid.
sluice_start() {
  local name=$1
  shift
  SLUICE_ENCRYPTION_KEY=$key SLUICE_ADDR=127.0.0.1:0 SLUICE_ALLOW_PRIVATE_TARGETS=true \
    sluice serve "$@" >"$tmp/$name.log" 2>&1 &
  last_pid=$!
  pids+=("$last_pid")
}
api_url() { sed -n 's/.*msg="ready: listening".*url=\(http:\/\/[^ ]*\).*/\1/p' "$tmp/$1.log" | sed -n 1p; }
has_url() { [[ -n $(api_url "$1") ]]; }
working() { grep -q 'msg="ready: working jobs"' "$tmp/$1.log"; }

api() { # METHOD PATH [BODY]: the API's answer, then its status on the last line
  local args=(-sS --max-time 20 -X "$1" -H "Authorization: Bearer $api_key" -w '\n%{http_code}')
  [[ $# -ge 3 ]] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}" "$base$2"
}
status_of() { tail -n 1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
post_events() { # TYPE N
  local i out
  for ((i = 1; i <= $2; i++)); do
    out=$(api POST /v1/events "{\"type\":\"$1\",\"payload\":{\"n\":$i}}") || fail "POST /v1/events"
    [[ $(status_of "$out") == 202 ]] || fail "POST /v1/events answered $(status_of "$out"): $(body_of "$out")"
  done
}
count() { # PATH PATTERN: how many times PATTERN is in the answer to GET PATH
  local out
  out=$(api GET "$1") || return 1
  [[ $(status_of "$out") == 200 ]] || return 1
  grep -o "$2" <<<"$(body_of "$out")" | wc -l
}
delivered() { [[ $(count "/v1/deliveries?endpoint_id=$endpoint&status=delivered&limit=500" '"event_id":"') -eq $1 ]]; }
stats() { curl -sS --max-time 20 "http://$receiver/stats"; }
received() { [[ $(stats) == "distinct=$1 "* ]]; }

before=20 queued=10 after=10

# --- the first cluster: events delivered, then events queued, then the backup --
cluster "$tmp/pg-a"
port_a=$cluster_port
export DATABASE_URL="postgres://sluice@127.0.0.1:$port_a/sluice?sslmode=disable"
log "first cluster on 127.0.0.1:$port_a"
sluice migrate 2>"$tmp/migrate-a.log" || fail "sluice migrate on the first cluster"
tenant=$(sluice tenant create --name drill --alert-email drill@example.com)
api_key=$(sed -n 's/.*"api_key"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$tenant")
[[ -n $api_key ]] || fail "no api_key from sluice tenant create: $tenant"

sluice_start api-a --api --dashboard
api_a=$last_pid
sluice_start worker-a --worker
worker_a=$last_pid
wait_for "Sluice's API to listen" has_url api-a
wait_for "Sluice's worker to work jobs" working worker-a
base=$(api_url api-a)

out=$(api POST /v1/endpoints "{\"url\":\"http://$receiver/hook\",\"description\":\"restore drill\"}") || fail "POST /v1/endpoints"
[[ $(status_of "$out") == 201 ]] || fail "POST /v1/endpoints answered $(status_of "$out"): $(body_of "$out")"
endpoint=$(body_of "$out" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
body_of "$out" | sed -n 's/.*"secret":"\([^"]*\)".*/\1/p' >"$tmp/secret"
[[ -n $endpoint && -s $tmp/secret ]] || fail "no id or secret in the endpoint: $(body_of "$out")"
out=$(api POST /v1/subscriptions "{\"endpoint_id\":\"$endpoint\",\"event_types\":[\"drill.*\"]}") || fail "POST /v1/subscriptions"
[[ $(status_of "$out") == 201 ]] || fail "POST /v1/subscriptions answered $(status_of "$out"): $(body_of "$out")"

post_events drill.before "$before"
wait_for "$before deliveries recorded delivered" delivered "$before"
wait_for "the receiver to have $before deliveries" received "$before"
log "$before events delivered; stopping the worker"
stop "$worker_a"
post_events drill.queued "$queued"
[[ $(count "/v1/deliveries?endpoint_id=$endpoint&status=pending&limit=500" '"event_id":"') -eq $queued ]] ||
  fail "the $queued deliveries posted without a worker are not all pending"
log "$queued events queued, no worker; taking the backup"

(cd "$tmp/work" && eval "$backup_block" && echo "$BACKUP" >"$tmp/backup.name") >"$tmp/pg-dump.log" 2>&1 ||
  { cat "$tmp/pg-dump.log" >&2; fail "docs/backup.md's backup block failed"; }
backup_file="$tmp/work/$(cat "$tmp/backup.name")"
[[ -s $backup_file ]] || fail "the backup block wrote no file"
log "backup: $(basename "$backup_file"), $(wc -c <"$backup_file") bytes"

stop "$api_a"
bash scripts/pg.sh stop "$tmp/pg-a" >/dev/null 2>&1
rm -rf "$tmp/pg-a"
log "stopped Sluice and deleted the first cluster"

# --- a fresh cluster: the restore ---------------------------------------------
cluster "$tmp/pg-b"
port_b=$cluster_port
export DATABASE_URL="postgres://sluice@127.0.0.1:$port_b/sluice?sslmode=disable"
log "fresh cluster on 127.0.0.1:$port_b; restoring"
(cd "$tmp/work" && BACKUP=$(cat "$tmp/backup.name") && eval "$restore_block") >"$tmp/pg-restore.log" 2>&1 ||
  { cat "$tmp/pg-restore.log" >&2; fail "docs/backup.md's restore block failed"; }

sluice_start api-b --api --dashboard
sluice_start worker-b --worker
wait_for "Sluice's API to listen on the restored database" has_url api-b
wait_for "Sluice's worker to work jobs on the restored database" working worker-b
base=$(api_url api-b)

n=$(count "/v1/events?type=drill.before&limit=500" '"type":"drill.before"') || fail "GET /v1/events on the restored database"
[[ $n -eq $before ]] || fail "the restored database lists $n drill.before events, not $before"
n=$(count "/v1/events?type=drill.queued&limit=500" '"type":"drill.queued"') || fail "GET /v1/events on the restored database"
[[ $n -eq $queued ]] || fail "the restored database lists $n drill.queued events, not $queued"
log "every event is listed after the restore"

wait_for "the queued deliveries to be delivered after the restore" delivered $((before + queued))
wait_for "the receiver to have the queued deliveries" received $((before + queued))
log "the $queued queued deliveries were delivered after the restore"

headers=$(curl -sS --max-time 20 -o /dev/null -D - --data-urlencode "api_key=$api_key" "$base/login") || fail "POST /login"
grep -q '^HTTP/[0-9.]* 303' <<<"$headers" || fail "signing in to the dashboard with the old API key did not answer 303: $headers"
grep -qi '^set-cookie: sluice_session=' <<<"$headers" || fail "signing in set no session cookie: $headers"
log "the old API key signs in to the dashboard"

post_events drill.after "$after"
total=$((before + queued + after))
wait_for "new posts to be delivered after the restore" delivered "$total"
wait_for "the receiver to have the new posts" received "$total"
s=$(stats)
[[ $s == "distinct=$total total=$total bad=0" ]] ||
  fail "the receiver saw $s: want each of the $total webhook-ids once, all signed with the endpoint's secret"
log "receiver: $s (each delivery once, every signature valid)"
log "PASSED in ${SECONDS}s"
