# Sluice — developer entry points. `make help` lists them.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Go may not be on PATH (CI): prefer /usr/local/go, add GOPATH/bin for tools.
ifneq ($(wildcard /usr/local/go/bin/go),)
export PATH := /usr/local/go/bin:$(PATH)
endif
GOPATH_BIN := $(shell PATH="$(PATH)" go env GOPATH 2>/dev/null)/bin
ifneq ($(GOPATH_BIN),/bin)
export PATH := $(PATH):$(GOPATH_BIN)
endif

GO        ?= go
TESTFLAGS ?=
BENCHFLAGS ?=
# -race: the batchers, wakers and recorders are concurrent code; the race
# detector needs cgo (gcc), which .ci/run installs when missing.
GOTEST    = $(GO) test -race -count=1 -timeout 30m $(TESTFLAGS)
# internal/app's timed tests hold a whole Sluice to the clock (rate limits,
# throttle windows); the package runs after the others, so that no other
# package's tests starve its processes of the box's cores meanwhile.
TIMED     = github.com/sluice-dev/sluice/internal/app

# Developer tools (sqlc, oapi-codegen, templ, staticcheck, govulncheck) are
# pinned in their own module, tools/go.mod, so they add nothing to the
# product's go.mod.
TOOL      = $(GO) tool -modfile=tools/go.mod
# Generated code, committed; `make check-generate` fails when it is stale.
GENERATED = internal/store/dbq api/spec.gen.go client/client.gen.go web
# Redocly CLI 2.x needs Node >= 20.19; older Node (Debian's 18) gets 1.x.
REDOCLY_VERSION        ?= 2.77.0
REDOCLY_VERSION_NODE18 ?= 1.34.5
# govulncheck's database; VULNDB=file:///path for an offline copy.
VULNDB    ?= https://vuln.go.dev

.PHONY: help run ha ha-stop test test-packages proxy-drill restore-drill check lint staticcheck vulncheck check-generate lint-openapi bench bench-compare faults generate vet build db-stop db-status clean distclean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

run: ## build and serve API + dashboard + workers against ./.data (or DATABASE_URL)
	bash scripts/run.sh

# Without DATABASE_URL, tests get a throwaway cluster (scripts/withpg.sh) that
# is stopped and deleted afterwards. Extra flags: make test TESTFLAGS='-run X -v'
test: ## go vet + every test (-race) against a private throwaway Postgres, then the proxy and restore drills
	$(GO) vet ./...
	if [ -n "$$DATABASE_URL" ]; then $(MAKE) --no-print-directory test-packages; else bash scripts/withpg.sh $(MAKE) --no-print-directory test-packages; fi
	bash scripts/proxy-drill.sh
	bash scripts/restore-drill.sh

proxy-drill: ## Sluice behind nginx with TLS on loopback, as docs/reverse-proxy.md sets it up: sign in through it, check the audit log's client address
	bash scripts/proxy-drill.sh

restore-drill: ## back up and restore on private clusters, as docs/backup.md says: events, deliveries and new posts checked after the restore
	bash scripts/restore-drill.sh

test-packages: # every package's tests on DATABASE_URL: internal/app last, alone
	$(GOTEST) $$($(GO) list ./... | grep -vx '$(TIMED)')
	$(GOTEST) $(TIMED)

bench: ## load benchmark (cmd/sluice-bench) against a throwaway Postgres
	if [ -n "$$DATABASE_URL" ]; then $(GO) run ./cmd/sluice-bench $(BENCHFLAGS); else bash scripts/withpg.sh $(GO) run ./cmd/sluice-bench $(BENCHFLAGS); fi

# Always on a private cluster, with pg_stat_statements for the statement counts.
bench-compare: ## BASE=<commit>: its build beside this tree's, alternating (cmd/sluice-bench/compare.go); BENCHFLAGS='-runs 5'
	@[ -n "$(BASE)" ] || { echo "usage: make bench-compare BASE=<commit> [BENCHFLAGS='-runs 5 -scenarios single-1']" >&2; exit 2; }
	SLUICE_PG_EXTRA_CONF="shared_preload_libraries = 'pg_stat_statements'" DATABASE_URL= \
		bash scripts/withpg.sh $(GO) run ./cmd/sluice-bench -compare $(BASE) $(BENCHFLAGS)

ha: ## Sluice (API + 2 workers) on a 3-node Patroni cluster of Postgres 15 with one etcd, on loopback (scripts/ha.sh; HA_PORT moves its ports)
	bash scripts/ha.sh start

ha-stop: ## stop what `make ha` started
	bash scripts/ha.sh stop

faults: ## fault suite (cmd/sluice-faults), installing patroni, etcd-server, pgbouncer when missing; FAULTSFLAGS=-run=pgcrash
	GO=$(GO) bash scripts/faults.sh $(FAULTSFLAGS)

check: vet staticcheck lint vulncheck check-generate lint-openapi ## static checks: vet, staticcheck, golangci-lint, govulncheck, generated code current, OpenAPI lint

# Every package but generated code wraps the errors that cross into it
# with what it was doing (wrapcheck) and compares errors with errors.Is/As
# (errorlint); .golangci.yml. The list is derived: generated packages are
# the ones GENERATED names.
LINTED = $$($(GO) list -f '{{.Dir}}' ./... | sed 's|^$(CURDIR)|.|' | grep -v -x -e './internal/store/dbq' -e './api' -e './client' -e './web')
lint: ## golangci-lint (errorlint, wrapcheck) on every package but generated code, pinned in tools/go.mod
	$(TOOL) golangci-lint run $(LINTED)

staticcheck: ## staticcheck (honnef.co/go/tools), pinned in tools/go.mod
	$(TOOL) staticcheck ./...

# Exit status 3 is "vulnerabilities found": that fails. Any other failure
# means govulncheck could not run (most often: its database is out of
# reach); that only warns, unless VULNCHECK_STRICT=1.
vulncheck: ## govulncheck: known vulnerabilities reachable from the code
	@rc=0; $(TOOL) govulncheck -db '$(VULNDB)' ./... || rc=$$?; \
	if [ $$rc -eq 0 ]; then exit 0; fi; \
	if [ $$rc -eq 3 ] || [ "$${VULNCHECK_STRICT:-0}" = 1 ]; then exit $$rc; fi; \
	echo "vulncheck: WARNING: govulncheck could not run (exit $$rc); no vulnerability check was made" >&2

check-generate: ## fail if `make generate` changes the generated code
	bash scripts/checkgen.sh $(GENERATED) -- $(MAKE) --no-print-directory generate

lint-openapi: ## lint openapi.yaml with Redocly CLI (npx; redocly.yaml is its config)
	@v=$(REDOCLY_VERSION); node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)' || v=$(REDOCLY_VERSION_NODE18); \
	echo "npx -y @redocly/cli@$$v lint openapi.yaml"; npx -y @redocly/cli@$$v lint openapi.yaml

generate: ## regenerate sqlc, oapi-codegen (spec and Go client) and templ code (tools pinned in tools/go.mod)
	$(TOOL) sqlc generate
	$(TOOL) oapi-codegen -config api/oapi-codegen.yaml openapi.yaml
	$(TOOL) oapi-codegen -config client/oapi-codegen.yaml openapi.yaml
	$(TOOL) templ generate

vet: ## go vet, and every Go file as gofmt writes it
	$(GO) vet ./...
	@unformatted=$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.data/*')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'd (run gofmt -w):" $$unformatted >&2; exit 1; fi

# The version `sluice version` and /healthz report.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build: ## build bin/sluice (VERSION=... names the build; default from git)
	$(GO) build -ldflags "-X github.com/sluice-dev/sluice/internal/sluice.Version=$(VERSION)" -o bin/sluice ./cmd/sluice

db-stop: ## stop the ./.data Postgres cluster left running by `make run`
	bash scripts/pg.sh stop .data/pg

db-status: ## is the ./.data Postgres cluster running?
	@bash scripts/pg.sh status .data/pg || true

clean: ## remove build and test output (keeps ./.data)
	rm -rf bin .data/bin
	rm -f *.test *.out *.prof coverage.html coverage.txt cover.html *.coverprofile

distclean: db-stop clean ## also stop and delete ./.data (database, encryption key, demo tenant)
	rm -rf .data
