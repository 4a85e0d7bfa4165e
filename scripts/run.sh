#!/usr/bin/env bash
# run.sh — what `make run` does: a local Sluice with API, dashboard and workers.
#
# Without DATABASE_URL: starts (or reuses) a private Postgres cluster in
# ./.data/pg on 127.0.0.1:${SLUICE_PG_PORT:-5433} and creates database "sluice".
# The cluster keeps running after Sluice exits; stop it with `make db-stop`.
# With DATABASE_URL set, that database is used as is.
#
# SLUICE_ENCRYPTION_KEY defaults to the contents of ./.data/encryption.key
# (32 random bytes, base64), generated on first run. Keep that file: secrets
# stored with it cannot be decrypted without it.
#
# Extra arguments are passed to `sluice serve`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

# Go toolchain (may not be on PATH).
if [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null 2>&1 || { echo "run.sh: go not found (install Go or add it to PATH)" >&2; exit 1; }
PATH="$PATH:$(go env GOPATH)/bin"
export PATH

data="$root/.data"
mkdir -p "$data"
# The postgres OS user (used when we are root) must be able to traverse .data;
# it does not need to read it (the key file itself stays 0600).
chmod 711 "$data"

# --- database -------------------------------------------------------------
demo_file="$data/demo.json"
if [[ -z "${DATABASE_URL:-}" ]]; then
  port=${SLUICE_PG_PORT:-5433}
  if [[ ! -f "$data/pg/data/PG_VERSION" ]]; then
    rm -f "$demo_file"   # a fresh cluster has no demo tenant yet
  fi
  rc=0; scripts/pg.sh start "$data/pg" "$port" || rc=$?
  if [[ $rc -eq 3 ]]; then
    echo "run.sh: port $port is taken; set SLUICE_PG_PORT to another port (or set DATABASE_URL)" >&2
    exit 1
  elif [[ $rc -ne 0 ]]; then
    exit "$rc"
  fi
  scripts/pg.sh createdb "$data/pg" "$port" sluice
  DATABASE_URL=$(scripts/pg.sh url "$data/pg" "$port" sluice)
  pg_note="Postgres:   $DATABASE_URL  (still running after exit; stop it with: make db-stop)"
else
  # A different database: remember its demo tenant separately.
  demo_file="$data/demo.$(printf '%s' "$DATABASE_URL" | sha256sum | cut -c1-12).json"
  pg_note="Postgres:   DATABASE_URL from the environment"
fi
export DATABASE_URL

# --- encryption key ---------------------------------------------------------
if [[ -z "${SLUICE_ENCRYPTION_KEY:-}" ]]; then
  keyfile="$data/encryption.key"
  if [[ ! -s "$keyfile" ]]; then
    (umask 077 && head -c 32 /dev/urandom | base64 > "$keyfile.tmp" && mv "$keyfile.tmp" "$keyfile")
    echo "run.sh: generated a new encryption key in $keyfile" >&2
  fi
  SLUICE_ENCRYPTION_KEY=$(tr -d '\n\r ' < "$keyfile")
  [[ -n $SLUICE_ENCRYPTION_KEY ]] || { echo "run.sh: $keyfile is empty" >&2; exit 1; }
fi
export SLUICE_ENCRYPTION_KEY
export SLUICE_ALLOW_PRIVATE_TARGETS=${SLUICE_ALLOW_PRIVATE_TARGETS:-true}
# Without SMTP, members' invitation and password-reset links are written
# to the log below instead of emailed (a deployment without either refuses
# to invite: docs/email.md).
export SLUICE_DEV_MAIL_LOG=${SLUICE_DEV_MAIL_LOG:-true}
if [[ -n ${SLUICE_SMTP_URL:-} ]]; then
  mail_note="sent over SLUICE_SMTP_URL"
elif [[ ${SLUICE_DEV_MAIL_LOG,,} =~ ^(1|t|true)$ ]]; then
  mail_note="not sent (no SLUICE_SMTP_URL): invitation and reset links are written to this log"
else
  mail_note="not sent (no SLUICE_SMTP_URL): members cannot be invited"
fi

# --- build, migrate, demo tenant -------------------------------------------
bin="$data/bin/sluice"
echo "run.sh: building ./cmd/sluice" >&2
go build -o "$bin" ./cmd/sluice
"$bin" migrate

if [[ ! -s "$demo_file" ]]; then
  "$bin" tenant create --name demo --alert-email demo@example.com > "$demo_file.tmp"
  mv "$demo_file.tmp" "$demo_file"
  chmod 600 "$demo_file"
fi
api_key=$(sed -n 's/.*"api_key"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$demo_file" | head -n 1)
tenant_id=$(sed -n 's/.*"tenant_id"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$demo_file" | head -n 1)
[[ -n $api_key ]] || { echo "run.sh: no api_key in $demo_file; delete it to create a new demo tenant" >&2; exit 1; }

# --- banner -----------------------------------------------------------------
addr=${SLUICE_ADDR:-127.0.0.1:8080}
host=${addr%:*}; aport=${addr##*:}
case $host in ""|0.0.0.0|"[::]"|"::") host=127.0.0.1 ;; esac
base="http://$host:$aport"

cat <<EOF

  ┌─ Sluice is starting ───────────────────────────────────────────────
  │ Dashboard:  $base/
  │ API:        $base/v1
  │ Tenant:     ${tenant_id:-?}
  │ API key:    $api_key
  │ $pg_note
  │ Mail:       $mail_note
  │
  │ Try it:
  │   curl -s -X POST $base/v1/events \\
  │     -H "Authorization: Bearer $api_key" \\
  │     -H "Content-Type: application/json" \\
  │     -d '{"type":"order.created","payload":{"id":"ord_1"}}'
  │   curl -s $base/v1/endpoints -H "Authorization: Bearer $api_key"
  │
  │ (the demo credentials are kept in ${demo_file#"$root"/})
  └────────────────────────────────────────────────────────────────────

EOF

exec "$bin" serve "$@"
