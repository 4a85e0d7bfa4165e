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
GOTEST    = $(GO) test -count=1 -timeout 15m $(TESTFLAGS) ./...

.PHONY: help run test bench faults generate vet build db-stop db-status clean distclean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run: ## build and serve API + dashboard + workers against ./.data (or DATABASE_URL)
	bash scripts/run.sh

# Without DATABASE_URL, tests get a throwaway cluster (scripts/withpg.sh) that
# is stopped and deleted afterwards. Extra flags: make test TESTFLAGS='-run X -v'
test: ## go vet + every test against a private throwaway Postgres
	$(GO) vet ./...
	if [ -n "$$DATABASE_URL" ]; then $(GOTEST); else bash scripts/withpg.sh $(GOTEST); fi

bench: ## load benchmark (cmd/sluice-bench) against a throwaway Postgres
	if [ -n "$$DATABASE_URL" ]; then $(GO) run ./cmd/sluice-bench $(BENCHFLAGS); else bash scripts/withpg.sh $(GO) run ./cmd/sluice-bench $(BENCHFLAGS); fi

faults: ## fault suite (cmd/sluice-faults): kill -9, Postgres crash/pause, bad receivers; FAULTSFLAGS=-run=pgcrash
	$(GO) run ./cmd/sluice-faults $(FAULTSFLAGS)

generate: ## regenerate sqlc, oapi-codegen (and templ, when it is a go tool) code
	$(GO) tool sqlc generate
	$(GO) tool oapi-codegen -config api/oapi-codegen.yaml openapi.yaml
	@if $(GO) tool -n templ >/dev/null 2>&1; then echo "$(GO) tool templ generate"; $(GO) tool templ generate; fi

vet: ## go vet
	$(GO) vet ./...

build: ## build bin/sluice
	$(GO) build -o bin/sluice ./cmd/sluice

db-stop: ## stop the ./.data Postgres cluster left running by `make run`
	bash scripts/pg.sh stop .data/pg

db-status: ## is the ./.data Postgres cluster running?
	@bash scripts/pg.sh status .data/pg || true

clean: ## remove build and test output (keeps ./.data)
	rm -rf bin .data/bin
	rm -f *.test *.out *.prof coverage.html coverage.txt cover.html *.coverprofile

distclean: db-stop clean ## also stop and delete ./.data (database, encryption key, demo tenant)
	rm -rf .data
