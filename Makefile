# runtime-extractor-controller — see README.md.
#   make run      local cluster (etcd, kube-apiserver, controller-manager, scheduler,
#                 3 kwok nodes) + the controller in the foreground
#   make test     unit, integration and end-to-end tests (E2E_SKIP=1 opts out of e2e)
SHELL := /bin/bash
GO ?= go
BIN := bin/runtime-extractor-controller
STATICCHECK_VERSION := v0.8.2
# Fuzz budgets are execution counts, not durations: a duration budget can end in a
# spurious "context deadline exceeded" failure under load (Go issue 75804, fixed in Go 1.27).
# About 15 s (FuzzMachine) and 30 s (FuzzParse) on 2 cores.
FUZZ_MACHINE_EXECS ?= 200000x
FUZZ_PARSE_EXECS ?= 20000x
LISTEN ?= 127.0.0.1:8443

.PHONY: api all build tools test unit model model-reverts schema rules race e2e fuzz verify docs run bench soak host-check host-series clean

all: build

# The binary's version (--version, build_info): git describe (a commit hash when no
# tag is reachable). Without git or a repository it is empty and the binary falls
# back to the module version Go recorded, else v0.0.0-dev. VERSION=... overrides it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
build:
	$(GO) build -ldflags '$(if $(VERSION),-X main.version=$(VERSION))' -o $(BIN) ./cmd/runtime-extractor-controller

# Builds the local cluster's binaries into bin/ (cached by version; about 12 min cold
# on 2 cores).
tools:
	./hack/build-tools.sh

# The end-to-end suite runs beside the rest (hack/test.sh): the convergence
# model's exhaustive mode, verbose so that its coverage line (sequences,
# distinct states) is printed, the nested modules, then the unit packages
# (TEST_PARTS); TEST_ALSO adds a second chain beside it (.ci/run).
test: tools build
	GO=$(GO) ./hack/test.sh

# Every sequence of up to 5 outside events over the model's core alphabet,
# and of up to 3 over its repairs alphabet, states pruned
# (TestModelExhaustive); about 3 min on 2 cores. MODEL_DEPTH=<n> changes the
# core depth.
MODEL_DEPTH ?= 5
model:
	$(GO) test -count=1 -timeout 30m -run '^TestModelExhaustive$$' -v ./pkg/runtimeextractor -model.depth=$(MODEL_DEPTH)

# The model finds each defect of testdata/model-reverts with its fix undone
# (testdata/model-reverts/*.patch, each applied to a scratch worktree of HEAD),
# by the invariant the patch names, after a baseline run on HEAD that must find
# nothing; prints each shortest failing sequence.
model-reverts:
	./hack/model-reverts.sh

# The ServiceMonitor of manifests/ against the CRD schema of the Prometheus
# Operator's Go module. manifests/schema is a module of its own, so that
# dependency stays out of the controller's graph; ./... never reaches it.
schema:
	cd manifests/schema && $(GO) mod tidy -diff && $(GO) vet ./... && \
	  $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... && $(GO) test -count=1 ./...

# The alerts of manifests/09-prometheusrule.yaml, unit-tested with Prometheus's
# rule engine (testdata/alerts_test.yaml, promtool's format), and checked
# against the binary's metrics. manifests/rules is a module of its own, like
# manifests/schema, so Prometheus's server packages stay out of the graph.
rules:
	cd manifests/rules && $(GO) mod tidy -diff && $(GO) vet ./... && \
	  $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... && $(GO) test -count=1 ./...

unit:
	E2E_SKIP=1 $(GO) test -count=1 ./...

# The unit and integration packages under the race detector, which must report
# nothing. e2e is left out: it needs the local cluster, and runs the controller
# as its own process. So is the model's exhaustive mode: its runs share
# nothing but a counter (TestPropertyControllerConverges runs the same
# simulator here, 2000 seeds on parallel workers), and under the race detector
# it would take 2 of the run's 4 minutes. About 2 min warm on 2 cores.
RACE_PKGS = $(shell $(GO) list ./... | grep -v /test/e2e)
race:
	E2E_SKIP=1 $(GO) test -race -count=1 -timeout 30m -skip '^TestModelExhaustive$$' $(RACE_PKGS)

e2e: tools build
	$(GO) test -count=1 -timeout 45m -v ./test/e2e/...

# Runs each fuzz target for a fixed number of executions.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzMachine$$' -fuzztime $(FUZZ_MACHINE_EXECS) -fuzzminimizetime 1s ./fsm
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_PARSE_EXECS) -fuzzminimizetime 1s ./pkg/config

verify:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@cp go.mod /tmp/rec-go.mod.$$$$ && cp go.sum /tmp/rec-go.sum.$$$$ && $(GO) mod tidy && \
	  if ! diff -q go.mod /tmp/rec-go.mod.$$$$ >/dev/null || ! diff -q go.sum /tmp/rec-go.sum.$$$$ >/dev/null; then \
	    cp /tmp/rec-go.mod.$$$$ go.mod; cp /tmp/rec-go.sum.$$$$ go.sum; rm -f /tmp/rec-go.*.$$$$; echo "go.mod/go.sum not tidy: run go mod tidy"; exit 1; fi; \
	  rm -f /tmp/rec-go.*.$$$$
	$(GO) test -count=1 -run 'TestGeneratedDocsAreCurrent|TestScenarios' ./cmd/runtime-extractor-controller/fsmtext
	$(GO) test -count=1 -run 'Golden' ./cmd/... ./pkg/resources
	$(GO) test -count=1 ./hack/readme-diagram ./manifests ./docs
	$(GO) run ./hack/apirecord

# Rewrites api/exported.txt, the record of the exported API that `make verify`
# checks (docs/embedding.md#api).
api:
	$(GO) run ./hack/apirecord -write

docs:
	$(GO) run ./cmd/runtime-extractor-controller diagram --format markdown > docs/state-machine.md
	$(GO) run ./cmd/runtime-extractor-controller diagram --format dot > docs/state-machine.dot
	set -o pipefail; $(GO) run ./cmd/runtime-extractor-controller diagram --format mermaid | $(GO) run ./hack/readme-diagram README.md

run: tools build
	$(GO) build -o bin/localcluster ./hack/localcluster
	bin/localcluster --nodes 3 -- $(BIN) --kubeconfig {kubeconfig} \
	  --namespace openshift-insights --listen $(LISTEN) --allow-default-images \
	  --leader-elect-lease-duration 15s --leader-elect-renew-deadline 10s --leader-elect-retry-period 2s

# Compares with bench/reference/latest.json; BENCH_ARGS=-write-reference makes
# this run the new reference (commit it with the change that moved a figure).
bench: tools build
	$(GO) run ./hack/bench -binary $(BIN) $(BENCH_ARGS)

# Not part of `make test`: the kill-at-random-point cycle of
# TestRandomKillsConverge, 200 times (SOAK_CYCLES=<n> to change) at the default
# settings; it reports every cycle that took over 30 s and ends with
# "soak: N/200 converged". FAULT_SEED=<seed> replays a run.
soak: tools build
	SOAK_CYCLES=$${SOAK_CYCLES:-200} $(GO) test -count=1 -timeout 4h -v -run '^TestSoakRandomKills$$' ./test/e2e/

# Not part of `make test`: they need the Insights Operator's source (HOST_SRC, a
# clone of openshift/insights-operator), which CI does not have. host-check applies
# hack/host/patches to it, runs its make vendor (against a local module proxy that
# serves this tree as v0.1.0), build, linters and tests, and runs the patched binary
# on the local cluster; host-series makes the series require the newest library
# (hack/host/README.md).
host-check: tools
	@test -n "$(HOST_SRC)" || { echo "usage: make host-check HOST_SRC=<clone of openshift/insights-operator>"; exit 2; }
	./hack/host/check.sh $(HOST_SRC)

host-series:
	@test -n "$(HOST_SRC)" || { echo "usage: make host-series HOST_SRC=<clone of openshift/insights-operator>"; exit 2; }
	./hack/host/series.sh $(HOST_SRC)

clean:
	rm -rf bin
