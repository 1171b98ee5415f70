#!/usr/bin/env bash
# series.sh HOST_SRC: vendors this tree's library (library_commit) into the first patch of the
# series again, and writes the series anew into patches/. The other patches
# are kept as they are. Run it (make host-series HOST_SRC=…) after a library
# change that the host's copy should have; check.sh fails until then.
set -euo pipefail
source "$(dirname "$0")/common.sh"

with_series series "$@"
library_snapshot "$work/lib"
version=$(library_version)
say "vendoring $MODULE $version"
vendor_library "$work/host" "$work/lib" "$version"

cd "$work/host"
git add -A go.mod go.sum vendor
if git diff --cached --quiet; then
	say "the series already vendors HEAD's library"
	exit 0
fi
first=$(git rev-list --reverse "$HOST_COMMIT..HEAD" | head -n1)
git commit --quiet --fixup="$first"
GIT_SEQUENCE_EDITOR=true git rebase --quiet --autosquash -i "$HOST_COMMIT"
rm -f "$HOST_DIR"/patches/*.patch
git format-patch --quiet --no-signature --zero-commit -o "$HOST_DIR/patches" "$HOST_COMMIT"
say "wrote $(ls "$HOST_DIR"/patches | wc -l) patches to hack/host/patches"
