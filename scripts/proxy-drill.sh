#!/usr/bin/env bash
# proxy-drill.sh — Sluice behind nginx with TLS on loopback, as
# docs/reverse-proxy.md sets it up, checked end to end.
#
#   bash scripts/proxy-drill.sh
#
# Installs nginx (Debian's nginx-light) when missing, or skips, saying so,
# when it cannot. Makes a self-signed certificate for 127.0.0.1, starts a
# throwaway Postgres (scripts/withpg.sh), Sluice with
# SLUICE_TRUSTED_PROXIES=127.0.0.1/32 and SLUICE_METRICS_ADDR, and nginx with
# the server block of docs/reverse-proxy.md. Then, as a client connecting from
# 127.0.0.2, it signs in to the dashboard through the proxy and checks the
# audit log shows the client's address, not the proxy's. Everything it
# starts is stopped when it ends. Exit status 0: the drill passed (or was
# skipped); 1: it failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

log() { echo "proxy-drill: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

# Postgres first: the rest runs inside withpg.sh, which stops and deletes
# its cluster afterwards.
if [[ -z "${PROXY_DRILL_IN_PG:-}" ]]; then
  # --- nginx: installed when missing, as .ci/run installs what it needs ---
  export PATH="$PATH:/usr/sbin:/sbin"
  if ! command -v nginx >/dev/null 2>&1; then
    SUDO=""
    if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
    log "nginx not found: installing nginx-light"
    if ! { command -v apt-get >/dev/null 2>&1 &&
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null; } ||
      ! command -v nginx >/dev/null 2>&1; then
      log "SKIPPED: nginx is not installed and could not be installed (apt-get install nginx-light); the proxy drill did not run"
      exit 0
    fi
  fi
  command -v openssl >/dev/null 2>&1 || fail "openssl not found"
  command -v curl >/dev/null 2>&1 || fail "curl not found"
  PROXY_DRILL_IN_PG=1 exec bash scripts/withpg.sh bash "$0"
fi

if [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi
export PATH="$PATH:/usr/sbin:/sbin"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-proxy-drill.XXXXXX")
chmod 755 "$tmp" # nginx's workers may run as another user
pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $rc -ne 0 ]]; then
    for f in "$tmp/sluice.log" "$tmp/nginx/error.log"; do
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

# wait_for CMD...: run CMD until it succeeds, at most 60 times, 0.5 s apart.
wait_for() {
  local i
  for ((i = 0; i < 60; i++)); do
    "$@" && return 0
    sleep 0.5
  done
  return 1
}

# --- Sluice ------------------------------------------------------------------
log "building ./cmd/sluice"
go build -o "$tmp/sluice" ./cmd/sluice
"$tmp/sluice" migrate 2>"$tmp/migrate.log" || { cat "$tmp/migrate.log" >&2; fail "sluice migrate"; }
tenant=$("$tmp/sluice" tenant create --name drill --alert-email drill@example.com)
api_key=$(sed -n 's/.*"api_key"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$tenant")
[[ -n $api_key ]] || fail "no api_key from sluice tenant create: $tenant"

SLUICE_ENCRYPTION_KEY=$(openssl rand -base64 32) \
  SLUICE_ADDR=127.0.0.1:0 \
  SLUICE_METRICS_ADDR=127.0.0.1:0 \
  SLUICE_TRUSTED_PROXIES=127.0.0.1/32 \
  "$tmp/sluice" serve --api --dashboard >"$tmp/sluice.log" 2>&1 &
pids+=($!)

# "ready: listening" lines name each listener's URL; /metrics's says
# metrics=/metrics. listening [-v]: the address of the metrics listener (of
# the other, with -v).
listening() {
  grep 'msg="ready: listening"' "$tmp/sluice.log" 2>/dev/null | grep "$@" 'metrics=/metrics' |
    sed -n 's/.*url=http:\/\/\([^ ]*\).*/\1/p' | sed -n 1p
}
sluice_addr="" metrics_addr=""
found() { sluice_addr=$(listening -v) metrics_addr=$(listening -e) && [[ -n $sluice_addr && -n $metrics_addr ]]; }
wait_for found || fail "Sluice did not start listening on SLUICE_ADDR and SLUICE_METRICS_ADDR"
log "Sluice on http://$sluice_addr, /metrics on http://$metrics_addr"

# --- TLS certificate -----------------------------------------------------------
mkdir -p "$tmp/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=127.0.0.1" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$tmp/tls/privkey.pem" -out "$tmp/tls/fullchain.pem" 2>/dev/null || fail "openssl could not make a certificate"

# --- nginx, with docs/reverse-proxy.md's server block -----------------------------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for ((p = ${PROXY_DRILL_PORT:-18443}; p < ${PROXY_DRILL_PORT:-18443} + 200; p++)); do
  port_busy "$p" || { port=$p; break; }
done
[[ -n $port ]] || fail "no free port for nginx"

block=$(awk '/<!-- proxy-drill:/ { marked = 1; next }
  marked && /^```nginx/ { inside = 1; next }
  inside && /^```/ { exit }
  inside { print }' docs/reverse-proxy.md)
[[ -n $block ]] || fail "no nginx server block marked for the drill in docs/reverse-proxy.md"
for want in 'listen 443 ssl;' '/etc/ssl/sluice/' 'proxy_pass http://127.0.0.1:8080;'; do
  grep -qF "$want" <<<"$block" || fail "docs/reverse-proxy.md's server block no longer has '$want' for the drill to replace"
done
block=${block//listen 443 ssl;/listen 127.0.0.1:$port ssl;}
block=${block//\/etc\/ssl\/sluice\//$tmp/tls/}
block=${block//proxy_pass http:\/\/127.0.0.1:8080;/proxy_pass http://$sluice_addr;}

mkdir -p "$tmp/nginx/logs"
for d in client_body proxy; do mkdir -p "$tmp/nginx/$d" && chmod 777 "$tmp/nginx/$d"; done
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 64; }
http {
    access_log $tmp/nginx/access.log;
    client_body_temp_path $tmp/nginx/client_body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/proxy;
    uwsgi_temp_path $tmp/nginx/proxy;
    scgi_temp_path $tmp/nginx/proxy;
$block
}
EOF
nginx -t -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" 2>"$tmp/nginx/test.log" || { cat "$tmp/nginx/test.log" >&2; fail "nginx refused the configuration"; }
nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' 2>>"$tmp/nginx/error.log" &
pids+=($!)
base="https://127.0.0.1:$port"
wait_for port_busy "$port" || fail "nginx did not listen on 127.0.0.1:$port"
log "nginx on $base"

# --- the client, at 127.0.0.2 ----------------------------------------------------
jar="$tmp/cookies"
client() { curl -sS --max-time 20 --interface 127.0.0.2 --cacert "$tmp/tls/fullchain.pem" -b "$jar" -c "$jar" "$@"; }

status=$(client -o /dev/null -w '%{http_code}' "$base/healthz") || fail "GET $base/healthz through nginx"
[[ $status == 200 ]] || fail "GET /healthz through nginx answered $status"

# Sign in to the dashboard through the proxy.
headers=$(client -o /dev/null -D - --data-urlencode "api_key=$api_key" "$base/login") || fail "POST /login through nginx"
grep -q '^HTTP/[0-9.]* 303' <<<"$headers" || fail "sign-in did not answer 303: $headers"
cookie=$(grep -i '^set-cookie: sluice_session=' <<<"$headers" || true)
[[ -n $cookie ]] || fail "sign-in set no session cookie: $headers"
grep -qi '; *secure' <<<"$cookie" || fail "the session cookie is not Secure behind the https proxy: $cookie"
log "signed in through the proxy; the session cookie is Secure"

# A change from the dashboard, with a made-up X-Forwarded-For along.
form=$(client "$base/event-types") || fail "GET /event-types through nginx"
csrf=$(grep -o 'name="csrf_token" value="[^"]*"' <<<"$form" | sed -n 1p | sed 's/.*value="//; s/"$//')
[[ -n $csrf ]] || fail "no CSRF token on /event-types"
status=$(client -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 203.0.113.66' \
  --data-urlencode "csrf_token=$csrf" --data-urlencode "name=drill.proxied" \
  --data-urlencode "description=made through the proxy" "$base/event-types") || fail "POST /event-types through nginx"
[[ $status == 303 ]] || fail "creating an event type from the dashboard answered $status"

# The same made-up header sent to Sluice directly, from 127.0.0.2: not believed.
status=$(curl -sS --max-time 20 --interface 127.0.0.2 -o /dev/null -w '%{http_code}' -X PUT \
  -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \
  -H 'X-Forwarded-For: 203.0.113.77' -H 'Forwarded: for=203.0.113.78' \
  -d '{"description":"made directly"}' "http://$sluice_addr/v1/event-types/drill.direct") || fail "PUT /v1/event-types directly"
[[ $status == 201 ]] || fail "creating an event type directly answered $status"

# The dashboard's audit log, read through the proxy.
audit=$(client "$base/audit") || fail "GET /audit through nginx"
row() { tr -d '\n' <<<"$audit" | sed 's|</tr>|</tr>\n|g' | grep -F "<code>$1</code>" | sed -n 1p; }
source_ip() { row "$1" | sed 's/<[^>]*>/ /g' | grep -oE '(^| )[0-9]{1,3}(\.[0-9]{1,3}){3}( |$)' | tail -n 1 | tr -d ' '; }
proxied=$(source_ip drill.proxied)
direct=$(source_ip drill.direct)
[[ $proxied == 127.0.0.2 ]] || fail "the audit log shows '$proxied' for the change made through the proxy, not the client's 127.0.0.2"
log "audit log: the change made through the proxy is from $proxied (the client), not 127.0.0.1 (the proxy) nor 203.0.113.66 (made up)"
[[ $direct == 127.0.0.2 ]] || fail "the audit log shows '$direct' for the change sent directly with made-up headers, not the peer 127.0.0.2"
log "audit log: the change sent directly with made-up headers is from $direct (the peer)"

# /metrics: not through the proxy, not on SLUICE_ADDR, only on SLUICE_METRICS_ADDR.
status=$(client -o /dev/null -w '%{http_code}' "$base/metrics")
[[ $status == 404 ]] || fail "/metrics through nginx answered $status"
status=$(curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "http://$sluice_addr/metrics")
[[ $status == 404 ]] || fail "/metrics on SLUICE_ADDR answered $status with SLUICE_METRICS_ADDR set"
metrics=$(curl -sS --max-time 20 "http://$metrics_addr/metrics") || fail "GET /metrics on SLUICE_METRICS_ADDR"
grep -q '^sluice_api_requests_total' <<<"$metrics" || fail "/metrics on SLUICE_METRICS_ADDR shows no sluice_api_requests_total"
log "/metrics answers on SLUICE_METRICS_ADDR only"

log "PASSED"
