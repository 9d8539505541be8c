# karpool: the commands behind the README. `make test` is what CI runs.
SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# End-to-end tests fail instead of skipping when a prerequisite is missing.
export KARPOOL_E2E := require
export KARPOOL_BIN_DIR := $(BIN)
TEST_TIMEOUT ?= 30m
# The image's build flags (Dockerfile) for everything make builds and tests, so the image check
# (cmd/karpool TestDockerfileBuildStage, which builds as the Dockerfile does) finds every
# package already compiled instead of compiling all of them a second time.
export CGO_ENABLED := 0
GOFLAGS += -trimpath
export GOFLAGS

.PHONY: all build up generate verify-generate tools early-tools test test-unit fuzz lint fmt funclen bench bench-vs-karpenter clean

all: build

## build: the karpool binary into bin/karpool
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/karpool ./cmd/karpool

## up: karpool's main job on this machine (control plane, AWS simulator, git server, controller); Ctrl-C stops it. UP_FLAGS=--demo walks through seed 003 and stops
UP_FLAGS ?=
up: build
	hack/tools.sh kube etcd kwok metrics-server kubectl
	$(BIN)/karpool up $(UP_FLAGS)

## tools: pinned etcd, kube-apiserver/-controller-manager/-scheduler, kwok, metrics-server, controller-gen, cue, gitea, helm into bin/
tools:
	hack/tools.sh

## generate: deepcopy code and CRDs (config/crd/bases, and the chart's copy in charts/karpool/crds) from api/
generate:
	hack/tools.sh controller-gen
	$(BIN)/controller-gen object paths=./api/karpenter/... paths=./api/karpenteraws/... paths=./api/karpool/...
	rm -f config/crd/bases/*.yaml
	$(BIN)/controller-gen crd paths=./api/karpenter/... paths=./api/karpenteraws/... paths=./api/karpool/... output:crd:dir=config/crd/bases
	rm -f charts/karpool/crds/*.yaml
	cp config/crd/bases/*.yaml charts/karpool/crds/

## verify-generate: fail if generated files differ from what make generate writes
verify-generate: generate
	@git diff --exit-code -- api config charts/karpool/crds || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api config charts/karpool/crds); if [ -n "$$untracked" ]; then echo "untracked generated files: $$untracked"; exit 1; fi

## test: every test, unit and end-to-end, on the real local control plane, and brief fuzzing
# go vet runs first, alone on both cores: it compiles every package once, where the lanes
# started together on a cold cache would each compile the same packages at once. Then three
# lanes share the cores. The packages whose tests start a control plane or Gitea mostly wait on
# the cluster, so they run in two lanes, each with its own control plane: internal/operator's
# tests (the longest package) in one, the other end-to-end packages one after the other in the
# second. The third runs the other packages' tests, then `make fuzz` (whose cost is compiling
# instrumented packages); the tools only a few tests need are built beside them: helm (for
# internal/operator's install test, which therefore runs in the second lane) first, Gitea after
# it. The second lane streams; the others are printed when all are done. Timings:
# BENCHMARKS.md "Build and test times".
E2E_IMPORTS := testbed/(localenv|giteatest)
EARLY_TOOLS := kube etcd kwok metrics-server controller-gen cue
# The package with a lane of its own, and its tests that need helm.
OWN_LANE_PKG := ./internal/operator
HELM_TESTS := ^TestInstalledController$$
# The packages that need Gitea (giteatest and its importers) run last in the second lane.
GITEA_PKGS := /testbed/giteatest$$
GITEA_IMPORTS := testbed/giteatest
test: early-tools verify-generate fmt funclen
	@rm -f $(BIN)/unit.pkgs $(BIN)/e2e-early.pkgs $(BIN)/e2e-gitea.pkgs $(BIN)/unit.status
	@$(GO) list -f '{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}' ./... \
		| awk -v re='$(E2E_IMPORTS)' -v own='$(OWN_LANE_PKG:./%=/%$$)' -v gitea='$(GITEA_PKGS)' -v giteaimp='$(GITEA_IMPORTS)' \
		'$$1 ~ own { next } { e2e=0; g=($$1 ~ gitea); for (i=2; i<=NF; i++) { if ($$i ~ re) e2e=1; if ($$i ~ giteaimp) g=1 } \
		  print $$1 > (!e2e ? "$(BIN)/unit.pkgs" : g ? "$(BIN)/e2e-gitea.pkgs" : "$(BIN)/e2e-early.pkgs") }'
	@touch $(BIN)/e2e-gitea.pkgs
	@echo "=== go vet, alone on both cores (it compiles every package once for the lanes below)"
	$(GO) vet ./...
	@hack/tools.sh helm > $(BIN)/tools-helm.log 2>&1 & helm=$$!; \
	{ $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$(cat $(BIN)/unit.pkgs) > $(BIN)/unit.log 2>&1; echo $$? > $(BIN)/unit.status; \
	  $(MAKE) --no-print-directory fuzz > $(BIN)/fuzz.log 2>&1; } & unitfuzz=$$!; \
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) -skip '$(HELM_TESTS)' $(OWN_LANE_PKG) > $(BIN)/own-lane.log 2>&1 & own=$$!; \
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$(cat $(BIN)/e2e-early.pkgs); status=$$?; \
	echo "=== helm, built beside those tests"; \
	wait $$helm; helmed=$$?; cat $(BIN)/tools-helm.log; \
	hack/tools.sh gitea > $(BIN)/tools-gitea.log 2>&1 & gitea=$$!; \
	if [ $$helmed -eq 0 ]; then $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) -run '$(HELM_TESTS)' $(OWN_LANE_PKG) || status=1; \
	else echo "building helm failed: skipped $(HELM_TESTS) in $(OWN_LANE_PKG)"; status=1; fi; \
	echo "=== gitea, built beside those tests"; \
	if wait $$gitea; then cat $(BIN)/tools-gitea.log; \
		$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$(cat $(BIN)/e2e-gitea.pkgs) || status=1; \
	else cat $(BIN)/tools-gitea.log; echo "building gitea failed: skipped $$(cat $(BIN)/e2e-gitea.pkgs)"; status=1; fi; \
	wait $$own; ownstatus=$$?; wait $$unitfuzz; fuzzed=$$?; unitstatus=$$(cat $(BIN)/unit.status 2>/dev/null || echo 1); \
	echo; echo "=== $(OWN_LANE_PKG) but $(HELM_TESTS) (run beside the other end-to-end packages)"; cat $(BIN)/own-lane.log; \
	echo; echo "=== the unit tests (run beside the end-to-end ones)"; cat $(BIN)/unit.log; \
	echo; echo "=== make fuzz (after the unit tests, in their lane)"; cat $(BIN)/fuzz.log; \
	if [ $$ownstatus -ne 0 ]; then echo "$(OWN_LANE_PKG) failed"; status=1; fi; \
	if [ $$unitstatus -ne 0 ]; then echo "the unit tests failed"; status=1; fi; \
	if [ $$fuzzed -ne 0 ]; then echo "make fuzz failed"; status=1; fi; \
	exit $$status

early-tools:
	hack/tools.sh $(EARLY_TOOLS)

# Fuzz targets as package:Target. `go test ./...` already replays each seed corpus; this explores.
FUZZ_TARGETS := ./schema/vet:FuzzVet ./schema:FuzzParseSchedule ./internal/migrate:FuzzMigrate \
	./testbed/awssim:FuzzEC2Query ./testbed/awssim:FuzzJSONRequest \
	./testbed/awssim:FuzzUserData ./testbed/awssim:FuzzEventPattern ./autoscaler/disruption:FuzzParseMinSavings \
	./autoscaler/cloud/aws/interruption:FuzzParse ./internal/featuregates:FuzzParse ./reconciler/review:FuzzMake \
	./internal/iampolicy:FuzzParse ./autoscaler/cloud/aws/prereq:FuzzPolicyScoped \
	./internal/mdsafe:FuzzText ./reconciler/review:FuzzMarkdownIsInert ./reconciler/status:FuzzMarkdownIsInert ./internal/redact:FuzzText \
	./manifests/build:FuzzBuildIsConfined ./api/karpool/v1alpha1:FuzzParseLimitPerHour
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can race its own deadline
# and fail a target that found nothing ("context deadline exceeded", go.dev/issue/75804, fixed in
# Go 1.27). Longer local runs: make fuzz FUZZTIME=100000x.
FUZZTIME ?= 1000x

## fuzz: each fuzz target for FUZZTIME executions (default 1000x)
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## test-unit: the tests that need no tools (e2e ones skip with a message)
test-unit:
	KARPOOL_E2E= $(GO) test ./...

## lint: gofmt, go vet and the engine's size check (make test runs go vet beside the end-to-end tests)
lint: fmt funclen
	$(GO) vet ./...

# The engine's functions stay under 100 lines and its types under 30 methods.
funclen:
	$(GO) run ./hack/funclen ./autoscaler/scheduling ./autoscaler/costbound ./autoscaler/lp

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: every benchmark, then a Markdown table of the results (raw output in bin/bench.txt)
BENCH_PKGS ?= ./...
bench: tools
	$(GO) test -run '^$$' -bench . -benchmem $(BENCH_PKGS) | tee $(BIN)/bench.txt
	@awk -f hack/benchtable.awk $(BIN)/bench.txt

## bench-vs-karpenter: karpool and Karpenter's kwok provider side by side on fresh local control planes, three scenarios (a tainted system node, an empty cluster, 45 s boots), three runs each (not part of make test; about 90 min; BENCHVS_FLAGS=-scenarios=system-node for one)
BENCHVS_FLAGS ?=
bench-vs-karpenter: tools build
	hack/tools.sh karpenter
	$(GO) run ./hack/benchvs -karpool $(BIN)/karpool -karpenter $(BIN)/karpenter-kwok -karpenter-crds $(BIN)/karpenter-crds -bin-dir $(BIN) $(BENCHVS_FLAGS)

clean:
	rm -rf $(BIN)
