#!/usr/bin/env bash
# check.sh HOST_SRC: applies the series in patches/ to a clean checkout of the
# Insights Operator at HOST_COMMIT (HOST_SRC is any git clone of
# openshift/insights-operator that has that commit), runs the host's make
# vendor against a local proxy that serves this tree's library, and its
# build, vet, linters and tests on what the series touches; then runs the
# patched host binary on the local cluster (hack/host/run). It builds every
# commit of the series. Needs the host's
# source, so it is `make host-check HOST_SRC=…`, not part of `make test`.
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
with_series check "$@"
git -C "$work/host" log --format='  %h %s' "$HOST_COMMIT..HEAD"
# the golangci-lint version the host's CI installs
lint_version=$(grep -o 'v2\.[0-9]*\.[0-9]*' "$work/host/.openshiftci/install-golangci-lint.sh" | head -n1)
[ -n "$lint_version" ] || die "no golangci-lint version in the host's .openshiftci/install-golangci-lint.sh"
lint="$REPO_ROOT/bin/golangci-lint-$lint_version/golangci-lint"
if [ ! -x "$lint" ]; then
	say "building golangci-lint $lint_version into bin/"
	GOBIN=$(dirname "$lint") GOFLAGS= go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$lint_version"
fi
library_proxy "$work"

cd "$work/host"
say "make vendor"
host_make_vendor "$work/host"
if [ -n "$(git status --porcelain)" ]; then
	git status --short | head -n 20 >&2
	die "make vendor changed the series' go.mod, go.sum or vendor/: it requires another library than commit $(library_commit); run make host-series HOST_SRC=$src"
fi
grep -qx "# $MODULE $LIBRARY_VERSION" vendor/modules.txt || die "the series vendors no $MODULE $LIBRARY_VERSION"
[ -f "vendor/$MODULE/LICENSE" ] || die "the series vendors $MODULE without its LICENSE"

# every commit builds under the host's -mod=vendor, so that bisect works
for commit in $(git rev-list --reverse "$HOST_COMMIT..HEAD"); do
	git checkout --quiet "$commit"
	say "go build ./... at $(git log -1 --format='%h %s')"
	go build ./...
done
touched=$(git diff --name-only "$HOST_COMMIT" HEAD -- '*.go' ':!vendor' | xargs -r -n1 dirname | sort -u | grep -v '^pkg/controller/runtimeextractor' | sed 's|^|./|')
say "go vet" $touched
go vet $touched
say "golangci-lint $lint_version (the host's .golangci.yml)" $touched
"$lint" run $touched
say "go test ./pkg/controller/..." $touched
go test ./pkg/controller/... $touched
say "building the patched host binary"
go build -o "$work/insights-operator" ./cmd/insights-operator

library_proxy_off
cd "$REPO_ROOT"
say "running it on the local cluster"
go run ./hack/host/run -binary "$work/insights-operator" -host "$work/host"
say "passed in $(( $(date +%s) - start ))s"
