# Set-up and day-to-day commands. `make run` starts the service (API and
# processor), `make test` runs the tests; both start PostgreSQL and Redis
# first if nothing answers at the configured URLs (scripts/services.sh).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go

# The tests' services; the service itself reads UUM_DATABASE_URL and
# UUM_REDIS_URL (see scripts/services.sh for their defaults).
export TEST_DATABASE_URL ?= postgres://127.0.0.1:5432/uum_test?sslmode=disable
export TEST_REDIS_URL ?= redis://127.0.0.1:6379/0

# The console's browser tests drive Chromium, which the first make test
# installs (about 650 MB); UUM_BROWSER_TESTS=skip leaves it out and skips
# them, for a run of the core only. require fails them without Chromium,
# so that make test cannot pass without them by accident.
export UUM_BROWSER_TESTS ?= require

# -race needs cgo, which Go turns off when it finds no C compiler. RACE=auto
# uses -race when cgo is on, RACE=1 always, RACE=0 never.
RACE ?= auto
ifeq ($(RACE),auto)
RACE_FLAG = $(if $(filter 1,$(shell $(GO) env CGO_ENABLED 2>/dev/null)),-race)
else ifeq ($(RACE),0)
RACE_FLAG :=
else
RACE_FLAG := -race
endif

# golangci-lint, pinned: `make lint` and `make test` install it into .bin/
# on first use (go install from the module proxy: a few minutes of
# downloading and compiling, once); `make test` lints first, LINT=0 skips it.
LINT ?= 1
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Go files outside .data/ (database files) and .bin/.
GOFILES_CMD := find . \( -path ./.data -o -path ./.bin -o -path ./.git -o -path ./vendor \) -prune -o -name '*.go' -print

.PHONY: help run test fuzz bench chaos build fmt vet lint services services-stop clean

help: ## List the targets
	@echo 'usage: make TARGET'
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## Start the whole service (PostgreSQL and Redis if needed, then API + processor)
	@scripts/run.sh

# The services come first: a machine that cannot get PostgreSQL or Redis
# (no sudo, say) learns it at once, not after the linter's install.
test: ## Lint, then run the tests (starts PostgreSQL and Redis if needed, installs Chromium and promtool; UUM_BROWSER_TESTS=skip: no browser)
	@scripts/services.sh test
	$(if $(filter 0,$(LINT)),@echo 'test: LINT=0: not linting' >&2,@$(MAKE) --no-print-directory lint)
	$(if $(RACE_FLAG),,$(if $(filter auto,$(RACE)),@echo 'test: cgo is off (no C compiler?): running without -race; install gcc to enable it' >&2))
	$(GO) test $(RACE_FLAG) -count=1 -timeout 12m ./...
	@# A fresh fuzz cache: the inputs earlier `make fuzz` runs left in GOCACHE
	@# are all re-run before fuzzing starts, and -fuzztime running out during
	@# that baseline is reported as a failure (seen with 270 cached inputs).
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) test -run '^$$' -fuzz '^FuzzDrain$$' -fuzztime $(TEST_FUZZTIME) -fuzzminimizetime 5x ./processor/ -args -test.fuzzcachedir="$$d"

# How long `make fuzz` fuzzes the drain, and how long `make test` does
# after the tests (FuzzDrain's seeds always run with the tests). Each run
# of FuzzDrain is a whole drain against Postgres and Redis (~0.2 s), so
# minimizing an input is bounded to 5 runs: at Go's default of 60 s per
# new input, 6 minutes of fuzzing ran 38 inputs; with 5 runs, 5 minutes
# ran 1,867.
FUZZTIME ?= 30s
TEST_FUZZTIME ?= 15s

fuzz: ## Fuzz the drain end to end against PostgreSQL and Redis (FUZZTIME=30s)
	@scripts/services.sh test
	$(GO) test -run '^$$' -fuzz '^FuzzDrain$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5x ./processor/

bench: ## Run the benchmarks
	@scripts/services.sh test
	$(GO) test -run '^$$' -bench . -benchmem ./...

# make chaos runs until CHAOS_FAULTS faults were injected; CHAOS_FLAGS adds
# flags of cmd/chaos (go run ./cmd/chaos -h), e.g. CHAOS_FLAGS='-seed 7 -keep'.
CHAOS_FAULTS ?= 1000
CHAOS_FLAGS ?=

chaos: build ## Inject faults into real api and processor processes and check nothing is lost or doubled (own Redis and Postgres)
	$(GO) run ./cmd/chaos -bin .bin -faults $(CHAOS_FAULTS) $(CHAOS_FLAGS)

build: ## Build the binaries into .bin/
	$(GO) build -o .bin/api ./cmd/api
	$(GO) build -o .bin/processor ./cmd/processor
	$(GO) build -o .bin/uumctl ./cmd/uumctl

fmt: ## Format the Go code
	@$(GOFILES_CMD) | xargs -r gofmt -w

vet: ## Run go vet
	$(GO) vet ./...

lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yaml: vet, staticcheck, errcheck, gofmt, goimports, ...)
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	@echo "lint: installing golangci-lint $(GOLANGCI_LINT_VERSION) into .bin/ (once; a few minutes)" >&2
	@mkdir -p .bin/tools
	GOBIN="$(CURDIR)/.bin/tools" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv .bin/tools/golangci-lint $@

services: ## Make sure PostgreSQL and Redis are up for both run and test
	@scripts/services.sh all

services-stop: ## Stop the PostgreSQL and Redis that scripts/services.sh started
	@scripts/services.sh stop

clean: ## Remove build output (.bin/); .data/ keeps the local databases
	rm -rf .bin
