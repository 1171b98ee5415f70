#!/usr/bin/env bash
# Shows that the convergence model finds each defect it guards: every patch
# under testdata/model-reverts undoes one defect's fix. For each, the model's
# exhaustive mode runs in a scratch worktree of HEAD with that patch applied,
# over the alphabet the patch names in a "model: <name>" line before its diff
# (core when none), and must fail; its coverage line and shortest failing
# sequence are printed. "model: property" runs the model's random mode
# instead (TestPropertyControllerConverges, its 2000 seeds): a defect of the
# scheduler's order shows only where the loop may choose among ready sources,
# which the exhaustive mode does in the table's order.
# First the model runs on HEAD as it is, both alphabets: it must find
# nothing, or no revert below proves anything. A revert counts as found only
# when the model fails with the invariant its "invariant: <name>" line names.
# Exits 1 when the baseline finds something, a patch no longer applies, or
# the model misses a defect or finds it by another invariant.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
scratch=$(mktemp -d)
cleanup() {
  git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
git -C "$root" worktree add --detach -q "$scratch/tree" HEAD
status=0
base=$(cd "$scratch/tree" && go test -count=1 -timeout 30m -run '^TestModelExhaustive$' ./pkg/runtimeextractor -v 2>&1 || true)
echo "baseline: $(grep '^model:' <<<"$base" | tr '\n' ' ')"
if grep -q 'shortest sequence\|^FAIL\|^--- FAIL' <<<"$base"; then
  echo "  the model fails on HEAD itself:"; grep -m3 'shortest sequence\|FAIL' <<<"$base"; exit 1
fi
# Arguments name patches to run (default: all of them).
patches=("$@")
if [[ ${#patches[@]} -eq 0 ]]; then
  patches=("$root"/testdata/model-reverts/*.patch)
fi
for patch in "${patches[@]}"; do
  patch=$(realpath "$patch")
  name=$(basename "$patch" .patch)
  git -C "$scratch/tree" checkout -q -- .
  if ! git -C "$scratch/tree" apply "$patch"; then
    echo "$name: the patch no longer applies"; status=1; continue
  fi
  # The alphabet the patch names ("model: repairs" before its diff), else core.
  alphabet=$(sed -n '/^diff --git/q; s/^model: *\([a-z]*\)$/\1/p' "$patch")
  alphabet=${alphabet:-core}
  invariant=$(sed -n '/^diff --git/q; s/^invariant: *\([a-z/-]*\)$/\1/p' "$patch")
  if [[ $alphabet == property ]]; then
    out=$(cd "$scratch/tree" && go test -count=1 -timeout 30m -run '^TestPropertyControllerConverges$' ./pkg/runtimeextractor 2>&1 || true)
    echo "$name: random mode, 2000 seeds"
    found=$(grep -m1 'shortest story' <<<"$out" || true)
  else
    out=$(cd "$scratch/tree" && go test -count=1 -timeout 30m -run "^TestModelExhaustive\$/^$alphabet\$" ./pkg/runtimeextractor -v -args -model.first 2>&1 || true)
    echo "$name: $(grep -m1 '^model:' <<<"$out" || echo 'no coverage line')"
    found=$(grep -m1 'shortest sequence' <<<"$out" || true)
  fi
  if [[ -z "$found" ]]; then
    echo "  NOT FOUND by the model"; status=1
  elif [[ -z "$invariant" || "$found" != *" $invariant: "* ]]; then
    echo "  found by another invariant than the patch names (${invariant:-none}): ${found#*_test.go:*: }"; status=1
  else
    echo "  ${found#*model_test.go:*: }"
  fi
done
exit $status
