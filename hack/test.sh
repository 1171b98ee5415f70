#!/usr/bin/env bash
# test.sh: the body of `make test`, once the tools and the binary are built.
# The end-to-end suite spends most of its time waiting on the local clusters'
# timers, so the model, the nested modules (schema, rules) and the unit
# packages run beside it instead of before it. They run under nice, so that
# the clusters' processes and the controllers under test keep the cores they
# ask for. Each part's output is printed whole when it ends; the run fails if
# any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
logs=$(mktemp -d "${TMPDIR:-/tmp}/make-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
failed=()

# report NAME STATUS SINCE: prints the part's log and its outcome.
report() {
	local name=$1 status=$2 since=$3
	cat "$logs/$name"
	if [ "$status" -eq 0 ]; then
		echo "make test: $name passed in $(($(date +%s) - since))s"
	else
		echo "make test: $name FAILED after $(($(date +%s) - since))s"
		failed+=("$name")
	fi
}

e2e_start=$(date +%s)
$GO test -count=1 -timeout 45m ./test/e2e/... >"$logs/e2e" 2>&1 &
e2e=$!

units=$($GO list ./... | grep -v /test/e2e)
for part in model schema rules units; do
	since=$(date +%s)
	case $part in
	units) nice -n 19 $GO test -count=1 -timeout 30m -skip '^TestModelExhaustive$' $units >"$logs/$part" 2>&1 ;;
	*) nice -n 19 make --no-print-directory "$part" >"$logs/$part" 2>&1 ;;
	esac
	report "$part" $? "$since"
done

echo "make test: waiting for the end-to-end suite (started $(($(date +%s) - e2e_start))s ago)"
wait "$e2e"
report e2e $? "$e2e_start"

echo "make test: $(($(date +%s) - start))s after the tools and the build"
if [ ${#failed[@]} -gt 0 ]; then
	echo "make test: FAILED: ${failed[*]}"
	exit 1
fi
