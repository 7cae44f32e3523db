# The brain tool-service suite. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      := $(CURDIR)/bin
MODULES  := pkg pkg/extract services/brain services/browser services/local services/sandbox services/storage services/search services/webfetch examples deploy
SERVICES := brain local sandbox storage search webfetch browser
# Packages of every module, for one go command over the workspace.
PKGS     := $(addprefix ./,$(addsuffix /...,$(MODULES)))
FUZZTIME ?= 10s

# VERSION and REVISION name the build everywhere an operator looks: each
# binary's -version, the build_info metric, MCP serverInfo.version, and
# the images' :$(VERSION) tag and OCI labels (pkg/version,
# scripts/version.sh: the v* tag, else a pseudo-version of the commit).
# Set them on the command line to override (make images VERSION=v1.2.3).
ifneq ($(origin VERSION),command line)
VERSION := $(shell bash scripts/version.sh)
endif
ifneq ($(origin REVISION),command line)
REVISION := $(shell bash scripts/version.sh revision)
endif
VERSION_PKG     := github.com/brain-tools/suite/pkg/version
VERSION_LDFLAGS := $(if $(VERSION),-X $(VERSION_PKG).version=$(VERSION)) $(if $(REVISION),-X $(VERSION_PKG).revision=$(REVISION))

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: lint-tools ## install what the tests and the demo need (bubblewrap, chromium, versitygw, node, postgresql, jaeger, the linters), once; the installers' output goes to bin/deps.log
	@for d in services/*/deps.sh; do bash "$$d"; done
	@bash scripts/mcp-deps.sh
	@bash scripts/jaeger-deps.sh

# The linters of `make lint`, pinned to versions that build on this Go
# (1.26.8), installed from the Go module proxy into bin/tools once per
# version.
STATICCHECK_VERSION   := v0.8.2
GOLANGCI_LINT_VERSION := v2.15.0
TOOLS                 := $(BIN)/tools
STATICCHECK           := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
GOLANGCI_LINT         := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)

$(STATICCHECK):
	@mkdir -p $(TOOLS)/staticcheck.d
	@. scripts/install.sh && cd $(TOOLS) && GOWORK=off GOBIN=$(TOOLS)/staticcheck.d logged "staticcheck $(STATICCHECK_VERSION) (go install)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@mv $(TOOLS)/staticcheck.d/staticcheck $@

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)/golangci-lint.d
	@. scripts/install.sh && cd $(TOOLS) && GOWORK=off GOBIN=$(TOOLS)/golangci-lint.d logged "golangci-lint $(GOLANGCI_LINT_VERSION) (go install)" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@mv $(TOOLS)/golangci-lint.d/golangci-lint $@

.PHONY: lint-tools
lint-tools: $(STATICCHECK) $(GOLANGCI_LINT) ## install the pinned linters (staticcheck, golangci-lint) into bin/tools

.PHONY: build
build: ## build every service and example into ./bin
	@mkdir -p $(BIN)
	$(GO) build -ldflags='$(VERSION_LDFLAGS)' -o $(BIN)/ $(addprefix ./services/,$(SERVICES)) ./examples/session ./examples/fileserver ./examples/genconfig

# The images (deploy/docker/<service>.Dockerfile) copy these binaries, built
# static for linux/IMAGE_ARCH (default: this machine's architecture), and
# are tagged :latest and :$(VERSION). DOCKER_BUILD_FLAGS go to every docker
# build: --network host where the engine gives build containers no network
# of their own (a dockerd run with --iptables=false, as make compose-test
# runs it, has no NAT for their apt-get).
IMAGES     := $(BIN)/images
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
DOCKER_BUILD_FLAGS ?=

.PHONY: images
images: ## static binaries for the images in bin/images, then the images (:latest and :VERSION) if a Docker engine runs
	@mkdir -p $(IMAGES)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags='-s -w $(VERSION_LDFLAGS)' -o $(IMAGES)/ $(addprefix ./services/,$(SERVICES))
	@if docker info >/dev/null 2>&1; then \
		for s in $(SERVICES); do \
			echo "image brain-tools/$$s:$(or $(VERSION),latest)"; \
			docker build --platform linux/$(IMAGE_ARCH) $(DOCKER_BUILD_FLAGS) \
				--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
				-f deploy/docker/$$s.Dockerfile -t brain-tools/$$s:latest $(if $(VERSION),-t brain-tools/$$s:$(VERSION)) . || exit 1; \
		done; \
	else \
		echo "no Docker engine available (docker info failed): binaries ready in bin/images;"; \
		echo "build the images where one runs: make images, then docker compose up"; \
	fi

.PHONY: run
run: deps build ## build, start the whole stack on loopback, run the demo session, stop
	@bash scripts/run.sh

.PHONY: up
up: deps build ## start the whole stack on loopback and keep it up until Ctrl-C (state and keys kept in bin/up)
	@bash scripts/run.sh up

# print-version prints VERSION (make compose-test compares it with what
# the images report).
.PHONY: print-version
print-version:
	@echo $(VERSION)

# COMPOSE_TEST_LIMIT bounds make compose-test in seconds (a cold machine
# takes about 12 minutes, a warm one under 2): past it the script gets
# SIGTERM, stops the step under way, tears down what it started (bounded
# too) and the target fails saying so, instead of holding CI to its own
# limit. --foreground keeps Ctrl-C reaching the script; the recipe's shell
# ignores it, so make waits for the teardown instead of returning at once.
# The script takes the port lock (/tmp/suite-ports.lock) itself.
COMPOSE_TEST_LIMIT ?= 1800

.PHONY: compose-test
compose-test: ## make images, run compose.yaml's stack in a Docker engine (one is started if none answers), drive the demo through it, tear down
	@trap '' INT; timeout --foreground -k 400 $(COMPOSE_TEST_LIMIT) bash scripts/compose-test.sh || { \
		rc=$$?; [ $$rc -ne 124 ] || echo "compose-test: stopped at its limit of $(COMPOSE_TEST_LIMIT) s (COMPOSE_TEST_LIMIT)" >&2; exit $$rc; }

.PHONY: config
config: deps build ## regenerate examples/brain.json from the bindings the services publish
	@bash scripts/run.sh config

.PHONY: lint
lint: lint-tools ## gofmt, go vet, every module built alone (GOWORK=off), staticcheck, golangci-lint (.golangci.yml)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) build ./... ) || { echo "$$m does not build alone"; exit 1; }; done
	$(STATICCHECK) $(PKGS)
	@for m in $(MODULES); do echo "golangci-lint $$m"; (cd $$m && $(GOLANGCI_LINT) run --allow-serial-runners ./...) || exit 1; done

.PHONY: test
test: deps lint ## lint, then every module's tests (-race, shuffled, uncached) and brief fuzzing
	$(GO) test -race -shuffle=on -count=1 -timeout 15m $(PKGS)
	BRAIN_TEST_STORE=postgres $(GO) test -race -shuffle=on -count=1 -timeout 10m ./services/brain/internal/server/
	BRAIN_TEST_STORE=replicas $(GO) test -race -shuffle=on -count=1 -timeout 10m -run '$(BRAIN_REPLICA_TESTS)' ./services/brain/internal/server/
	$(MAKE) --no-print-directory fuzz

# BRAIN_REPLICA_TESTS are brain's API tests that make test runs a third
# time, on three brain processes sharing one PostgreSQL behind a
# round-robin proxy (the first run is on SQLite, the second on PostgreSQL).
# The others set options (allowLoopback, the SSRF guard's allow-list for
# loopback, is the one replicas take) or reach into the server, which
# replicas cannot.
BRAIN_REPLICA_TESTS = ^(TestHealthzAndRouting|TestCatalog|TestCreateSession|TestTenantIsolation|TestCreateCall|TestWaitAndGet|TestCancelCall|TestInterruptAndClose|TestListCalls|TestListCallsPaging|TestTraceparent|TestEventStream|TestEventPage|TestInspection|TestSessionEndOrderAndStreamEnd|TestCloseRacingNewCalls|TestHeadLikeGet|TestSessionEventsAfterContextDone|TestRefusalsDoNotEchoHugeInput|TestTwoAuthorizationHeaders|TestReplicaKilledMidCall|TestFunctionTool|TestApprovalGate|TestSessionRequireApproval|TestApprovedCallWaitsForASlot|TestMaxConcurrency|TestApprovalCall|TestApprovalCallResent|TestApprovalResendStopsAtExpiry|TestApprovalWithdrawn|TestApprovalDecisionNotWithdrawn|TestApprovalWithdrawalResent|TestApprovalResendRetryAfter|TestApprovalWithdrawalStopsAtExpiry|TestRetryable|TestReplicaRespondThroughAnother|TestCustomToolRevisions|TestSessionToolSetRefusals|TestSessionMCPServers|TestTenantsKeepToThemselves)$$

# FUZZ_TARGETS are the fuzz targets `make fuzz` runs, each as Target:package.
FUZZ_TARGETS = \
	FuzzRead:./pkg/sse \
	FuzzDecodeResult:./pkg/tool \
	FuzzDecodeResultFast:./pkg/tool \
	FuzzDecodeCallFast:./services/brain/internal/server \
	FuzzEncoders:./services/brain/internal/server \
	FuzzAppendString:./pkg/tool \
	FuzzRequestAppendJSON:./pkg/tool \
	FuzzDecodeRequest:./pkg/service \
	FuzzIntegers:./pkg/strictjson \
	FuzzPlan:./pkg/schema \
	FuzzBase64:./pkg/strictjson \
	FuzzParse:./services/brain/internal/config \
	FuzzResponse:./services/brain/internal/invoke

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	@set -e; for t in $(FUZZ_TARGETS); do GO=$(GO) bash scripts/fuzz.sh $${t%%:*} $${t#*:} $(FUZZTIME); done

.PHONY: bench
bench: deps ## side-by-side benchmarks of every service against its anchor
	@bash scripts/bench.sh

.PHONY: clean
clean: ## remove ./bin
	rm -rf $(BIN)
