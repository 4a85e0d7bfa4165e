#!/usr/bin/env bash
# faults.sh — make faults: install what the fault scenarios run when it is
# missing (PostgreSQL's server, for the Patroni and PgBouncer scenarios
# patroni, etcd-server, pgbouncer, curl, and for the broker scenarios
# redis-server, nats-server, rabbitmq-server), as .ci/run does for make test,
# then run cmd/sluice-faults with the arguments given (FAULTSFLAGS).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
log() { echo "faults.sh: $*" >&2; }
if [[ -x /usr/local/go/bin/go ]]; then export PATH="/usr/local/go/bin:$PATH"; fi
export PATH="$PATH:/usr/sbin:/sbin"
GO=${GO:-go}

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v patroni >/dev/null 2>&1 || need+=(patroni)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v pgbouncer >/dev/null 2>&1 || need+=(pgbouncer)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
[[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || need+=(rabbitmq-server)
if [[ ${#need[@]} -gt 0 ]]; then
  command -v apt-get >/dev/null 2>&1 || { log "missing ${need[*]} and no apt-get to install them"; exit 1; }
  SUDO=""
  if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  if [[ " ${need[*]} " == *" postgresql "* && ! -e /etc/postgresql-common/createcluster.conf ]]; then
    # No system cluster on :5432: every scenario runs its own.
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  log "installing: ${need[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
    { log "could not install ${need[*]}"; exit 1; }
fi
exec "$GO" run ./cmd/sluice-faults "$@"
