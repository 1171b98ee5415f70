#!/usr/bin/env bash
# test.sh: the body of `make test`, once the tools and the binary are built.
# The end-to-end suite spends most of its time waiting on the local clusters'
# timers, so the model, the nested modules (schema, rules) and the unit
# packages run beside it instead of before it, in one chain of make targets
# (TEST_PARTS, default "model schema rules units"). TEST_ALSO names a second
# chain, so that both cores have work while the suite waits. .ci/run uses both:
# model-reverts in place of model (it runs the model on HEAD first) and race
# in place of units (the same packages under the race detector), so nothing
# runs twice. Everything beside the suite runs under nice, so that the
# clusters' processes and the controllers under test keep the cores they ask
# for. Each part's output is printed whole, with its time; the run fails if
# any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
logs=$(mktemp -d "${TMPDIR:-/tmp}/make-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)

e2e_start=$(date +%s)
$GO test -count=1 -timeout 45m ./test/e2e/... >"$logs/e2e" 2>&1 &
e2e=$!

units=$($GO list ./... | grep -v /test/e2e)

# chain PART...: runs the parts one after another, each into its log, with
# its exit status and time beside it, and says when each one ends.
chain() {
	local part since
	for part; do
		since=$(date +%s)
		case $part in
		units) nice -n 19 $GO test -count=1 -timeout 30m -skip '^TestModelExhaustive$' $units ;;
		*) nice -n 19 make --no-print-directory "$part" ;;
		esac >"$logs/$part" 2>&1
		echo $? >"$logs/$part.status"
		echo $(($(date +%s) - since)) >"$logs/$part.took"
		echo "make test: $part ended after $(cat "$logs/$part.took")s (its log follows once the parts beside the suite are done)"
	done
}

read -ra parts <<<"${TEST_PARTS:-model schema rules units}"
chain "${parts[@]}" &
chains=($!)
if [ -n "${TEST_ALSO:-}" ]; then
	read -ra also <<<"$TEST_ALSO"
	chain "${also[@]}" &
	chains+=($!)
	parts+=("${also[@]}")
fi

failed=()
# report NAME STATUS TOOK: prints the part's log and its outcome.
report() {
	cat "$logs/$1"
	if [ "$2" -eq 0 ]; then
		echo "make test: $1 passed in $3s"
	else
		echo "make test: $1 FAILED after $3s"
		failed+=("$1")
	fi
}

wait "${chains[@]}"
for part in "${parts[@]}"; do
	report "$part" "$(cat "$logs/$part.status")" "$(cat "$logs/$part.took")"
done

echo "make test: waiting for the end-to-end suite (started $(($(date +%s) - e2e_start))s ago)"
wait "$e2e"
report e2e $? $(($(date +%s) - e2e_start))

echo "make test: $(($(date +%s) - start))s after the tools and the build"
if [ ${#failed[@]} -gt 0 ]; then
	echo "make test: FAILED: ${failed[*]}"
	exit 1
fi
