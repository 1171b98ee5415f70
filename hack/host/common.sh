# Shared by check.sh and series.sh: the host's commit the series applies to, and
# how the library is vendored into the host. Sourced, not run.

# HOST_COMMIT is the openshift/insights-operator commit the series is made
# against (main on 2026-05-05, "Merge pull request #1335").
HOST_COMMIT=8494b69b8075fd1e8eac49db77bcda7588078155
MODULE=github.com/insights-runtime-extractor/controller
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
	trap 'rm -rf "$work"' EXIT
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
# the library's packages without their tests, test data and docs, and the
# local-cluster code only tests use.
LIBRARY_PATHS=(fsm pkg go.mod ':(exclude)pkg/testcluster' ':(exclude)*_test.go' ':(exclude)*.md' ':(exclude)**/testdata/**')

# library_commit: the newest commit that changed LIBRARY_PATHS, the one whose
# library the series vendors; later commits that leave them alone do not
# make the series stale.
library_commit() {
	git -C "$REPO_ROOT" log -1 --format=%H HEAD -- "${LIBRARY_PATHS[@]}"
}

# library_version: the pseudo-version of library_commit.
library_version() {
	local commit when
	commit=$(library_commit)
	when=$(TZ=UTC git -C "$REPO_ROOT" show -s --format=%cd --date=format-local:%Y%m%d%H%M%S "$commit")
	echo "v0.0.0-$when-${commit:0:12}"
}

# library_snapshot DIR: the library at library_commit (without the work
# tree's uncommitted changes) in DIR.
library_snapshot() {
	mkdir -p "$1"
	git -C "$REPO_ROOT" archive "$(library_commit)" | tar -x -C "$1"
}

# vendor_library HOST LIB VERSION: the host's go.mod requires MODULE at
# VERSION, and vendor/ holds the packages it imports, taken from LIB. The
# module is not on the proxy, so it is vendored through a replace that is
# then dropped: with -mod=vendor (the host's GOFLAGS) go.mod and
# vendor/modules.txt must agree, and they do without it.
vendor_library() {
	local host=$1 lib=$2 version=$3
	(
		cd "$host"
		require_first "$version"
		go mod edit -replace="$MODULE=$lib"
		GOFLAGS= go mod tidy
		GOFLAGS= go mod vendor
		go mod edit -dropreplace="$MODULE"
		# modules.txt names the replacement twice: on the module's line and
		# in a line of its own.
		sed -i -e "s|^# $MODULE $version => .*|# $MODULE $version|" \
			-e "\|^# $MODULE => |d" vendor/modules.txt
		go build ./... >/dev/null
	)
}

# require_first VERSION: go.mod (in the working directory) requires MODULE at
# VERSION in its first require block, in order, beside the host's other
# direct requirements (go mod edit would append it to the last block).
require_first() {
	go mod edit -droprequire="$MODULE"
	awk -v line="	$MODULE $1" -v mod="$MODULE" '
		/^require \(/ && !seen { seen = 1; inblock = 1; print; next }
		inblock && !done && ($0 == ")" || $1 > mod) { print line; done = 1 }
		inblock && $0 == ")" { inblock = 0 }
		{ print }
	' go.mod >go.mod.new
	mv go.mod.new go.mod
}
