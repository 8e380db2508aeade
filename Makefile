# localeflow — `make help` lists the targets.
#
# Everything runs from a fresh clone: `make test` installs the pinned local
# AWS stack into $(LOCALEFLOW_CACHE) (default ~/.cache/localeflow) first.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

export LOCALEFLOW_CACHE ?= $(HOME)/.cache/localeflow
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(LOCALEFLOW_CACHE)/golangci-lint/$(GOLANGCI_LINT_VERSION)/golangci-lint
BUILD := build
BUILD_LOG := $(BUILD)/precompile.log
$(shell mkdir -p $(BUILD))
FUZZTIME ?= 10s
BENCHTIME ?= 1s
TEST_TIMEOUT ?= 15m
DEMO_PREFIX ?= localeflow

# Function directories that hold a main package.
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
# Go files of the root module, for the gofmt check (other modules, e.g.
# infra/, are listed by their own lint targets).
GO_FILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' \
	-not -path './$(BUILD)/*' -not -path './infra/*' -not -path './dev/emulators/tools/*' -not -path './.cache/*')

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: install
install: ## Install the pinned local AWS stack, the contract tools (npm ci) and download Go modules (idempotent)
	dev/emulators/install.sh
	$(MAKE) $(SCHEMACHECK_STAMP)

# The standard tools run on the published contract (dev/schemacheck: ajv,
# an OpenAPI validator, a bundler, openapi-typescript, tsc), pinned by its
# lockfile and installed with npm ci.
SCHEMACHECK_DIR := dev/schemacheck
SCHEMACHECK_STAMP := $(SCHEMACHECK_DIR)/node_modules/.localeflow-installed

$(SCHEMACHECK_STAMP): $(SCHEMACHECK_DIR)/package.json $(SCHEMACHECK_DIR)/package-lock.json
	cd $(SCHEMACHECK_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: test-contract
test-contract: $(SCHEMACHECK_STAMP) ## Standard tools on contract/: ajv strict, vectors, OpenAPI validate + bundle, openapi-typescript + tsc
	@echo "== test-contract: ajv strict on contract/schema, vector documents, OpenAPI validation and bundling, openapi-typescript + tsc"
	node $(SCHEMACHECK_DIR)/check.mjs

.PHONY: test
test: install ## Unit + integration tests on DynamoDB Local + kumo (started and stopped here), test-moto, test-contract, then test-infra (cfn-lint, IAM sufficiency)
	@echo "== compiling every test binary before entering the offline network namespace"
	go test -count=1 -run '^$$' -exec true ./... >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	@echo "== go test ./... with the local stack (LOCALEFLOW_INTEGRATION=1)"
	@# Every AWS call of the functions and of the CLI is recorded (adapters/awsclient.Record)
	@# into $(AWS_CALLS) for the IAM sufficiency check of test-infra.
	rm -f $(AWS_CALLS) $(CHECKS_SUMMARY)
	@# The health page's browser test is required (fails, not skips, without chromium) wherever
	@# install.sh can provide chromium: as root with apt-get, unless LOCALEFLOW_SKIP_CHROMIUM=1
	@# (or where chromium is already on PATH). A fresh root CI machine whose apt-get install
	@# failed therefore fails here; a non-root developer without chromium sees the test skip.
	require=0; \
	if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then require=1; \
	elif [[ $$(id -u) == 0 && $${LOCALEFLOW_SKIP_CHROMIUM:-} != 1 ]] && command -v apt-get >/dev/null; then require=1; fi; \
	echo "== LOCALEFLOW_REQUIRE_CHROMIUM=$$require"; \
	LOCALEFLOW_REQUIRE_CHROMIUM=$$require LOCALEFLOW_AWS_CALL_LOG=$(AWS_CALLS) \
		dev/emulators/with-stack.sh go test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) test-moto
	$(MAKE) test-contract
	LOCALEFLOW_AWS_CALLS=$(AWS_CALLS) LOCALEFLOW_REQUIRE_INDEPENDENT_CHECKS=1 LOCALEFLOW_CHECKS_SUMMARY=$(CHECKS_SUMMARY) $(MAKE) test-infra
	@echo "== independent checks that ran:"
	@cat $(CHECKS_SUMMARY)

# The independent checks' outputs: the recorded AWS calls and one summary
# line per check (printed at the end of make test).
AWS_CALLS := $(abspath $(BUILD))/aws-calls.jsonl
CHECKS_SUMMARY := $(abspath $(BUILD))/independent-checks.txt
# MOTO_TESTS run on moto_server as the second AWS implementation: the store
# conformance suites, and the operator commands that need EventBridge
# archives (replay; kumo has none) or drain queues (dlq redrive).
MOTO_TESTS := ^(TestConformanceDynamoDB|TestStoreConformance|TestReplayOnMoto|TestDLQOnLocalStack|TestQuarantineOnLocalStack)$$
MOTO_PKGS := ./adapters/releasedb ./adapters/monitordb ./cmd/localeflow

.PHONY: test-moto
test-moto: install ## The store conformance suites, replay and dlq redrive on moto_server (the second AWS implementation)
	go test -count=1 -run '^$$' -exec true $(MOTO_PKGS) >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	@echo "== moto: $(MOTO_TESTS) in $(MOTO_PKGS)"
	@status=0; LOCALEFLOW_STACK=moto dev/emulators/with-stack.sh go test -count=1 -v -run '$(MOTO_TESTS)' $(MOTO_PKGS) \
		>$(BUILD)/moto.log 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL|panic)' $(BUILD)/moto.log || true; \
	line="moto $$(source dev/emulators/lib.sh && echo $$MOTO_VERSION): $$(grep -c '^--- PASS' $(BUILD)/moto.log) tests passed, $$(grep -c '^--- FAIL' $(BUILD)/moto.log) failed, $$(grep -c '^--- SKIP' $(BUILD)/moto.log) skipped ($$(grep -c -- '    --- SKIP' $(BUILD)/moto.log) subtests skipped: moto does not serialize concurrent conditional writes) in $(MOTO_PKGS)"; \
	echo "$$( ((status == 0)) && echo ok || echo FAILED): $$line" | tee -a $(CHECKS_SUMMARY); \
	if ((status != 0)); then echo "== moto log: $(BUILD)/moto.log"; exit $$status; fi

.PHONY: test-unit
test-unit: ## Unit tests only (no local stack; integration tests skip)
	go test -count=1 ./...

.PHONY: lint
lint: lint-go lint-infra ## gofmt, go vet of every package, golangci-lint; CDK app lint

.PHONY: lint-go
lint-go: $(GOLANGCI_LINT) ## gofmt + go vet + golangci-lint of the root module
	@echo "== gofmt"
	@files="$$(gofmt -l $(GO_FILES))"; if [[ -n "$$files" ]]; then echo "gofmt needed:"; echo "$$files"; exit 1; fi
	@echo "== go vet ./..."
	go vet ./...
	@echo "== golangci-lint $(GOLANGCI_LINT_VERSION)"
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

$(GOLANGCI_LINT):
	@echo "== installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(dir $@)"
	GOBIN=$(abspath $(dir $@)) GOFLAGS=-mod=mod go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: build
build: ## Build each function as linux/arm64 build/<fn>/bootstrap
	@if [[ -z "$(FUNCTIONS)" ]]; then echo "no functions/*/main.go yet"; fi
	@for fn in $(FUNCTIONS); do \
		echo "== build/$$fn/bootstrap"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o $(BUILD)/$$fn/bootstrap ./functions/$$fn; \
	done

# The limit of each stripped linux/arm64 bootstrap (decimal MB, as the
# sizes are reported in docs/performance.md).
BOOTSTRAP_MAX_BYTES ?= 10000000

.PHONY: sizes
sizes: build ## Build the functions and fail when a bootstrap is above BOOTSTRAP_MAX_BYTES (10 MB)
	@fail=0; for fn in $(FUNCTIONS); do \
		size=$$(stat -c %s $(BUILD)/$$fn/bootstrap); \
		if (( size > $(BOOTSTRAP_MAX_BYTES) )); then verdict="ABOVE the limit"; fail=1; else verdict=ok; fi; \
		printf '%-12s %10d bytes (%s MB)  %s\n' "$$fn" "$$size" "$$(awk -v s=$$size 'BEGIN{printf "%.2f", s/1e6}')" "$$verdict"; \
	done; \
	if (( fail )); then echo "a bootstrap is above $(BOOTSTRAP_MAX_BYTES) bytes (docs/performance.md, Bootstrap size)"; exit 1; fi

COLDSTART_ROUNDS ?= 3
COLDSTART_STARTS ?= 10
.PHONY: coldstart
coldstart: install ## Init + first invoke of each stripped bootstrap under aws-lambda-rie: COLDSTART_ROUNDS (3) x COLDSTART_STARTS (10), median <= 100 ms
	go test -count=1 -run '^$$' -exec true $(addprefix ./functions/,$(FUNCTIONS)) >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	@echo "== load before: $$(cat /proc/loadavg)"
	LOCALEFLOW_COLDSTART=1 LOCALEFLOW_COLDSTART_ROUNDS=$(COLDSTART_ROUNDS) LOCALEFLOW_COLDSTART_STARTS=$(COLDSTART_STARTS) \
		dev/emulators/with-stack.sh go test -count=1 -p 1 -timeout 20m -run '^TestColdStartUnderRIE$$' -v $(addprefix ./functions/,$(FUNCTIONS)) \
		| tee $(BUILD)/coldstart.txt | grep -E '^(=== RUN|--- |ok|FAIL|PASS|panic)|coldstart '
	@echo "== load after: $$(cat /proc/loadavg)"

.PHONY: bench
bench: install ## Run every benchmark (with the local stack up) into build/bench.txt
	@pkgs="$$(grep -rl --include='*_test.go' -E '^func Benchmark' . | grep -v -e '^./infra/' -e node_modules | xargs -r -n1 dirname | sort -u)"; \
	if [[ -z "$$pkgs" ]]; then echo "no benchmarks yet"; exit 0; fi; \
	go test -count=1 -run '^$$' -exec true $$pkgs >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }; \
	dev/emulators/with-stack.sh go test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $$pkgs | tee $(BUILD)/bench.txt; \
	echo "== results in $(BUILD)/bench.txt"; \
	go run ./dev/cmd/benchcited -results $(BUILD)/bench.txt

.PHONY: bench-cited
bench-cited: install ## Run each benchmark docs/performance.md and docs/scale.md cite once (-benchtime 1x, local stack); fails unless each passes
	go test -count=1 -run '^$$' -exec true ./... >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	go build -o $(BUILD)/benchcited ./dev/cmd/benchcited
	@echo "== load before: $$(cat /proc/loadavg)"
	dev/emulators/with-stack.sh $(BUILD)/benchcited -run | tee $(BUILD)/bench-cited.txt
	@echo "== load after: $$(cat /proc/loadavg)"

.PHONY: fuzz
fuzz: ## Run each Fuzz target for FUZZTIME (default 10s)
	@targets="$$(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v -e '^./infra/' -e node_modules \
		| sed -E 's|^(.*)/[^/]*_test.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort -u)"; \
	if [[ -z "$$targets" ]]; then echo "no fuzz targets yet"; exit 0; fi; \
	while read -r dir name; do \
		echo "== $$dir $$name ($(FUZZTIME))"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$dir"; \
	done <<<"$$targets"

SEEDS ?= 10000
START ?= 1
JOBS ?= 2
.PHONY: sim
sim: ## Deterministic whole-pipeline simulation: SEEDS seeds from START in JOBS processes (VERBOSE=1: full traces; DAY2=kinds: day-2 operations, docs/simulation.md; ADAPTERS=1: on the DynamoDB adapters)
	@go test -c -o $(BUILD)/sim.test ./dev/proof/sim
	@per=$$(( ($(SEEDS) + $(JOBS) - 1) / $(JOBS) )); pids=(); started=$$SECONDS; \
	for ((j = 0; j < $(JOBS); j++)); do \
		from=$$(( $(START) + j * per )); n=$$(( $(SEEDS) - j * per < per ? $(SEEDS) - j * per : per )); \
		(( n > 0 )) || continue; \
		$(BUILD)/sim.test -test.run '^TestSimSeeds$$' -test.v -test.timeout 0 -sim.start=$$from -sim.seeds=$$n \
			$(if $(VERBOSE),-sim.verbose,) $(if $(DAY2),-sim.day2=$(DAY2),) $(if $(ADAPTERS),-sim.adapters,) >$(BUILD)/sim-$$j.log 2>&1 & pids+=($$!); \
		echo "== seeds $$from..$$((from + n - 1)) → $(BUILD)/sim-$$j.log"; \
	done; \
	status=0; for pid in "$${pids[@]}"; do wait $$pid || status=1; done; \
	cat $(BUILD)/sim-*.log | grep -v -e '^=== RUN' -e '^--- ' -e '^PASS' -e '^FAIL$$' ; \
	echo "== $(SEEDS) seeds from $(START) in $$((SECONDS - started)) s, $(JOBS) jobs: $$( ((status == 0)) && echo all passed || echo FAILED)"; \
	rm -f $(BUILD)/sim-*.log; exit $$status

MUTANTS_JOBS ?= 1
.PHONY: mutants
mutants: ## Mutation harness: each mutant of dev/mutants (one at a time, via go test -overlay) against the sim's blocks; table in build/mutants.md (ONLY=id,id  MUTANTS_JOBS=n)
	go run ./dev/cmd/mutants -jobs $(MUTANTS_JOBS) $(if $(ONLY),-only $(ONLY),) -out $(BUILD)/mutants.md

.PHONY: up
up: install ## Start a long-lived local stack in network namespace "localeflow" (run commands with dev/emulators/exec.sh)
	dev/emulators/up.sh

.PHONY: down
down: ## Stop the stack started by make up
	dev/emulators/down.sh

# LOCALEFLOW_VERSION is what `localeflow --version` prints for a build from
# a checkout (a tagged module build prints its module version).
LOCALEFLOW_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: build-local
build-local: ## Build every function for this machine (build/local/<fn>/bootstrap, linux/host arch) and the local tools
	@echo "== building the functions for this machine ($(BUILD)/local/<fn>/bootstrap, linux/$$(go env GOHOSTARCH))"
	@for fn in $(FUNCTIONS); do \
		GOOS=linux GOARCH=$$(go env GOHOSTARCH) CGO_ENABLED=0 go build -tags lambda.norpc -trimpath \
			-o $(BUILD)/local/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done
	go build -o $(BUILD)/local/localeflow-bootstrap ./dev/cmd/localeflow-bootstrap
	go build -o $(BUILD)/local/localeflow-runner ./dev/cmd/localeflow-runner
	go build -o $(BUILD)/local/localeflow-forward ./dev/cmd/localeflow-forward
	go build -buildvcs=auto -ldflags "-X main.buildVersion=$(LOCALEFLOW_VERSION)" -o $(BUILD)/local/localeflow ./cmd/localeflow

.PHONY: demo
demo: install build-local ## The pipeline demo: five changes through poller, coordinator, health on the local stack
	go build -o $(BUILD)/local/localeflow-demo ./dev/cmd/localeflow-demo
	dev/emulators/with-stack.sh $(BUILD)/local/localeflow-demo -prefix $(DEMO_PREFIX) -bin-dir $(BUILD)/local -out $(BUILD)/local/demo $(DEMO_FLAGS)

.PHONY: demo-localstack
demo-localstack: install build-local ## The same demo against LocalStack (docker compose; needs Docker)
	go build -o $(BUILD)/local/localeflow-demo ./dev/cmd/localeflow-demo
	localstack/demo.sh $(BUILD)/local -prefix $(DEMO_PREFIX) $(DEMO_FLAGS)

.PHONY: demo-resources
demo-resources: install ## Start the local stack, create every resource of the topology, print them, stop
	go build -o $(BUILD)/localeflow-bootstrap ./dev/cmd/localeflow-bootstrap
	dev/emulators/with-stack.sh $(BUILD)/localeflow-bootstrap -prefix $(DEMO_PREFIX)
	@echo "== the resources above were created on DynamoDB Local + kumo and discarded with the stack"

.PHONY: test-localstack
test-localstack: ## Run the integration suite against LocalStack (docker compose; needs Docker)
	localstack/test-localstack.sh

.PHONY: clean
clean: ## Remove build outputs (keeps the cache)
	rm -rf $(BUILD)

include infra/infra.mk

.PHONY: proof
proof: install ## Fault-injection suite + invariant checker tests, then a 1,000-change soak, on the local stack
	go test -count=1 -run '^$$' -exec true ./dev/proof/... >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	dev/emulators/with-stack.sh go test -count=1 -timeout 20m ./dev/proof/...
	LOCALEFLOW_SOAK=1 LOCALEFLOW_SOAK_CHANGES=1000 LOCALEFLOW_SOAK_RELEASES=100 LOCALEFLOW_SOAK_BUDGET=4m \
		dev/emulators/with-stack.sh go test -count=1 -timeout 20m -run '^TestSoak$$' -v ./dev/proof/soak

.PHONY: soak
soak: install ## Soak: 8 pollers + 2 coordinators over SOAK_CHANGES (10,000) changes and SOAK_RELEASES (1,000) releases, ≤ SOAK_BUDGET (8m)
	go test -count=1 -run '^$$' -exec true ./dev/proof/soak >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	LOCALEFLOW_SOAK=1 LOCALEFLOW_SOAK_CHANGES=$${SOAK_CHANGES:-10000} LOCALEFLOW_SOAK_RELEASES=$${SOAK_RELEASES:-1000} \
		LOCALEFLOW_SOAK_BUDGET=$${SOAK_BUDGET:-8m} \
		dev/emulators/with-stack.sh go test -count=1 -timeout 30m -run '^TestSoak$$' -v ./dev/proof/soak | tee $(BUILD)/soak.txt

.PHONY: cost
cost: install ## Counted cost benchmarks (requests, capacity units, GB-s, USD) into build/cost.txt
	go test -count=1 -run '^$$' -exec true ./dev/proof/cost >$(BUILD_LOG) 2>&1 || { cat $(BUILD_LOG); exit 1; }
	dev/emulators/with-stack.sh go test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./dev/proof/cost | tee $(BUILD)/cost.txt
