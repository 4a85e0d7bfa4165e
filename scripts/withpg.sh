#!/usr/bin/env bash
# withpg.sh — run a command against a throwaway PostgreSQL cluster.
#
#   scripts/withpg.sh CMD [ARGS...]
#
# Creates a fresh cluster in a new temporary directory, starts it on a free
# loopback port (trying SLUICE_PG_TEST_PORT, default 55432, and up), exports
#   DATABASE_URL=postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
# runs CMD, then always stops the cluster and deletes the directory — also
# when CMD fails or the script is interrupted. Exits with CMD's exit code.
# The superuser may CREATE DATABASE freely (e.g. one database per test package).
set -euo pipefail

[[ $# -ge 1 ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pg="$here/pg.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-pg.XXXXXX")
chmod 755 "$tmp"
if [[ $(id -u) -eq 0 ]] && id -u postgres >/dev/null 2>&1; then
  chown postgres: "$tmp"
fi

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  "$pg" stop "$tmp" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

port_busy() {  # something already accepts connections on 127.0.0.1:$1
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

base=${SLUICE_PG_TEST_PORT:-55432}
port=""
for ((p = base; p < base + 200; p++)); do
  port_busy "$p" && continue
  rc=0
  "$pg" start "$tmp" "$p" 2>"$tmp/start.err" || rc=$?
  if [[ $rc -eq 0 ]]; then port=$p; break; fi
  if [[ $rc -ne 3 ]]; then cat "$tmp/start.err" >&2; exit 1; fi   # 3 = port in use: try the next
done
[[ -n $port ]] || { echo "withpg.sh: no free port in $base..$((base + 199))" >&2; exit 1; }

export DATABASE_URL; DATABASE_URL=$("$pg" url "$tmp" "$port" postgres)
echo "withpg.sh: throwaway Postgres at $DATABASE_URL" >&2

# Run CMD as a child (not exec) so the EXIT trap can clean up afterwards.
rc=0
"$@" || rc=$?
exit "$rc"
