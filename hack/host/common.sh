# Shared by check.sh and series.sh: the host's commit the series applies to, and
# how the library is vendored into the host. Sourced, not run.

# HOST_COMMIT is the openshift/insights-operator commit the series is made
# against (main on 2026-05-05, "Merge pull request #1335").
HOST_COMMIT=8494b69b8075fd1e8eac49db77bcda7588078155
MODULE=github.com/insights-runtime-extractor/controller
# LIBRARY_VERSION is the version the series requires. Until the module is
# published, a local proxy (library_proxy) serves it, made from library_commit.
LIBRARY_VERSION=v0.1.0
HOST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HOST_DIR/../.." && pwd)

die() { echo "host: $*" >&2; exit 1; }
say() { echo "host: $(date -u +%H:%M:%S) $*"; }

# host_checkout SRC DIR: a clean checkout of the host at HOST_COMMIT in DIR.
host_checkout() {
	local src=$1 dir=$2
	git -C "$src" cat-file -e "$HOST_COMMIT^{commit}" 2>/dev/null ||
		die "$src has no commit $HOST_COMMIT (fetch openshift/insights-operator into it)"
	git clone --quiet --no-checkout "$src" "$dir"
	git -C "$dir" checkout --quiet --detach "$HOST_COMMIT"
	git -C "$dir" config user.name "runtime-extractor-controller"
	git -C "$dir" config user.email "runtime-extractor-controller@users.noreply.github.com"
}

# with_series NAME ARGS...: takes the one argument, HOST_SRC, as $src; makes
# the work directory $work (removed on exit); and checks the host out at
# HOST_COMMIT with the series applied, in $work/host.
with_series() {
	local name=$1
	shift
	[ $# -eq 1 ] || die "usage: hack/host/$name.sh HOST_SRC (a git clone of openshift/insights-operator)"
	src=$(cd "$1" && pwd)
	work=$(mktemp -d "${TMPDIR:-/tmp}/host-$name.XXXXXX")
	# the module cache's files are read-only
	trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
	say "checking out the host at $HOST_COMMIT"
	host_checkout "$src" "$work/host"
	say "applying the series"
	apply_series "$work/host"
}

# apply_series DIR: git am the series onto the checkout in DIR.
apply_series() {
	local dir=$1
	if ! git -C "$dir" am --quiet --whitespace=nowarn "$HOST_DIR"/patches/*.patch; then
		git -C "$dir" am --abort || true
		die "the series in hack/host/patches does not apply to $HOST_COMMIT"
	fi
}

# LIBRARY_PATHS are the files of this repository a host's vendor/ can hold:
# the library's packages without their tests, test data and docs, its licence,
# and not the local-cluster code only tests use.
LIBRARY_PATHS=(LICENSE fsm pkg go.mod ':(exclude)pkg/testcluster' ':(exclude)*_test.go' ':(exclude)*.md' ':(exclude)**/testdata/**')

# library_commit: the newest commit that changed LIBRARY_PATHS, the one the
# local proxy serves as LIBRARY_VERSION; later commits that leave them alone
# do not make the series stale.
library_commit() {
	git -C "$REPO_ROOT" log -1 --format=%H HEAD -- "${LIBRARY_PATHS[@]}"
}

# library_proxy DIR: a file-system module proxy in DIR that serves MODULE at
# LIBRARY_VERSION, zipped from library_commit as a public proxy zips a tag
# (modproxy), and then exports the Go environment of a host build against it:
# - GOPROXY asks it first, then the module cache's downloads, then the proxy
#   configured here;
# - GOMODCACHE is a cache of the work directory's own, so that a version made
#   from another commit never lingers in the user's cache;
# - GONOSUMDB: the public checksum database knows no unpublished version.
library_proxy() {
	local dir=$1 cache upstream
	say "serving $MODULE $LIBRARY_VERSION from $(git -C "$REPO_ROOT" rev-parse --short=12 "$(library_commit)") on a local proxy"
	(cd "$HOST_DIR/modproxy" && go run . -repo "$REPO_ROOT" -commit "$(library_commit)" \
		-module "$MODULE" -version "$LIBRARY_VERSION" -out "$dir/proxy") | sed 's/^/  /'
	cache=$(go env GOMODCACHE)
	upstream=$(go env GOPROXY)
	export GOPROXY="file://$dir/proxy,file://$cache/cache/download,$upstream"
	export GOMODCACHE="$dir/modcache"
	export GONOSUMDB="$MODULE"
	restore_go_env="export GOPROXY='$upstream' GOMODCACHE='$cache'; unset GONOSUMDB"
}

# library_proxy_off: the Go environment as it was before library_proxy.
library_proxy_off() {
	eval "$restore_go_env"
}

# host_make_vendor DIR: the host's own make vendor (go mod tidy, go mod
# vendor, go mod verify) in DIR. build-machinery-go's minimum Go version check
# misreads go1.26 as older than 1.15.2; the override skips only that check.
host_make_vendor() {
	make -C "$1" --no-print-directory vendor GO_REQUIRED_MIN_VERSION:= 2>&1 |
		grep -v -e '^go: downloading ' -e '^go: finding ' -e 'set: Illegal option -o pipefail' | sed 's/^/  /'
	return "${PIPESTATUS[0]}"
}
