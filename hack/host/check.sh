#!/usr/bin/env bash
# check.sh HOST_SRC: applies the series in patches/ to a clean checkout of the
# Insights Operator at HOST_COMMIT (HOST_SRC is any git clone of
# openshift/insights-operator that has that commit), runs the host's build,
# vet and tests on what the series touches, and then runs the patched host
# binary on the local cluster (hack/host/run). Needs the host's source, so it
# is `make host-check HOST_SRC=…`, not part of `make test`.
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
with_series check "$@"
git -C "$work/host" log --format='  %h %s' "$HOST_COMMIT..HEAD"

version=$(library_version)
say "the vendored library is this tree's: $MODULE $version"
library_snapshot "$work/lib"
vendored="$work/host/vendor/$MODULE"
[ -d "$vendored" ] || die "the series vendors no $MODULE"
grep -qx "# $MODULE $version" "$work/host/vendor/modules.txt" ||
	die "the series vendors $(grep "^# $MODULE " "$work/host/vendor/modules.txt"), not $version: run make host-series HOST_SRC=$src"
stale=0
while IFS= read -r f; do
	cmp -s "$vendored/$f" "$work/lib/$f" || { echo "  differs: $f" >&2; stale=1; }
done < <(cd "$vendored" && find . -type f | sort)
[ "$stale" = 0 ] || die "the series vendors another library than $version's: run make host-series HOST_SRC=$src"

cd "$work/host"
say "go build ./..."
go build ./...
touched=$(git diff --name-only "$HOST_COMMIT" HEAD -- '*.go' ':!vendor' | xargs -r -n1 dirname | sort -u | grep -v '^pkg/controller/runtimeextractor' | sed 's|^|./|')
say "go vet" $touched
go vet $touched
say "go test ./pkg/controller/..." $touched
go test ./pkg/controller/... $touched
say "building the patched host binary"
go build -o "$work/insights-operator" ./cmd/insights-operator

cd "$REPO_ROOT"
say "running it on the local cluster"
go run ./hack/host/run -binary "$work/insights-operator" -host "$work/host"
say "passed in $(( $(date +%s) - start ))s"
