#!/usr/bin/env bash
# series.sh HOST_SRC: makes the series require the library as library_commit
# makes it: the host's make vendor, against the local proxy (library_proxy),
# at the end of the series, writes go.mod, go.sum and vendor/ into the first
# patch, and the series is written anew into patches/. Run it (make host-series HOST_SRC=…)
# after a library change that the host's copy should have; check.sh fails
# until then.
set -euo pipefail
source "$(dirname "$0")/common.sh"

with_series series "$@"
library_proxy "$work"
cd "$work/host"
# go.sum holds the hashes of the version made from an older commit
sed -i "\|^$MODULE |d" go.sum
say "make vendor"
host_make_vendor "$work/host"
if [ -z "$(git status --porcelain)" ]; then
	say "the series already requires library commit $(library_commit)"
	exit 0
fi
commits=($(git rev-list --reverse "$HOST_COMMIT..HEAD"))
git add go.mod go.sum
git add -A vendor
git diff --cached --quiet || git commit --quiet --fixup="${commits[0]}"
GIT_SEQUENCE_EDITOR=true git rebase --quiet --autosquash -i "$HOST_COMMIT"
rm -f "$HOST_DIR"/patches/*.patch
git format-patch --quiet --no-signature --zero-commit -o "$HOST_DIR/patches" "$HOST_COMMIT"
say "wrote $(ls "$HOST_DIR"/patches | wc -l) patches to hack/host/patches"
