#!/usr/bin/env bash
# Builds the local cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) from the Go module proxy into bin/, keyed by the hash of each
# tool module's go.mod/go.sum and the Go version: a binary is rebuilt only when its
# version changes. A cold build takes about 12 minutes on 2 cores; progress is
# printed every 30 s. bin/<name> links to the current bin/cache/<name>-<key>.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bindir="$root/bin"
mkdir -p "$bindir/cache"
gover=$(go env GOVERSION)

# One build at a time: a second `make tools` (another terminal, a parallel test
# run) waits for the first instead of compiling the same thing twice.
if command -v flock >/dev/null; then
  exec 9>"$bindir/cache/.lock"
  if ! flock -n 9; then
    echo "another tool build is running; waiting for it..."
    flock 9
  fi
fi

ticker=""
stop_ticker() {
  if [[ -n "$ticker" ]]; then
    kill "$ticker" 2>/dev/null || true
    wait "$ticker" 2>/dev/null || true
    ticker=""
  fi
}
trap stop_ticker EXIT

# name  module-dir  package
tools=(
  "etcd etcd ."
  "kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler"
  "kwok kwok sigs.k8s.io/kwok/cmd/kwok"
)

# Binaries built from the module proxy have no git metadata, so Kubernetes would
# report v0.0.0-master (and kubectl would warn about version skew): stamp the
# version the tool module pins.
kube_ldflags() {
  local v major minor pkg=k8s.io/component-base/version
  v=$(cd "$root/hack/tools/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  major=${v#v}; major=${major%%.*}
  minor=${v#v}; minor=${minor#*.}; minor=${minor%%.*}
  echo "-X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

ldflags_of() { # module dir -> linker flags
  case "$1" in
    kube) kube_ldflags ;;
    *) echo "" ;;
  esac
}

key_of() { # module dir -> short version key (module pins, Go version, linker flags)
  cat "$root/hack/tools/$1/go.mod" "$root/hack/tools/$1/go.sum" <(echo "$gover") <(ldflags_of "$1") |
    sha256sum | cut -c1-12
}

total=$SECONDS
for entry in "${tools[@]}"; do
  read -r name dir pkg <<<"$entry"
  out="$bindir/cache/$name-$(key_of "$dir")"
  if [[ ! -x "$out" ]]; then
    echo "building $name (cold builds take minutes; progress every 30s)..."
    start=$SECONDS
    # The trap takes the pending sleep down with the ticker, so none is orphaned.
    ( trap 'kill $! 2>/dev/null; exit 0' TERM
      while sleep 30 & wait $!; do echo "  ... still building $name ($((SECONDS - start))s)"; done ) &
    ticker=$!
    if ! (cd "$root/hack/tools/$dir" && go build -ldflags "$(ldflags_of "$dir")" -o "$out.tmp" "$pkg"); then
      stop_ticker
      rm -f "$out.tmp"
      echo "build of $name failed" >&2
      exit 1
    fi
    stop_ticker
    mv "$out.tmp" "$out"
    echo "built $name in $((SECONDS - start))s"
  fi
  ln -sfn "cache/$(basename "$out")" "$bindir/$name"
done

# kwok's stage files ship inside its module: node "fast" (initialize), node
# "heartbeat" and pod "fast" (ready, complete, delete). Only the Stage manifests:
# each directory also holds a kustomization.yaml and testdata/ with sample Nodes
# and Pods, which kwok must not load. Our own (hack/tools/kwok/stages.yaml)
# follow; the file's name keys on them too.
ours="$root/hack/tools/kwok/stages.yaml"
stages="$bindir/cache/kwok-stages-$(key_of kwok)-$(sha256sum <"$ours" | cut -c1-8).yaml"
if [[ ! -s "$stages" ]]; then
  kwokdir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  : >"$stages.tmp"
  for sub in node/fast node/heartbeat pod/fast; do
    for f in "$kwokdir/kustomize/stage/$sub"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      grep -q '^kind: Stage$' "$f" || continue
      echo "---" >>"$stages.tmp"
      cat "$f" >>"$stages.tmp"
    done
  done
  echo "---" >>"$stages.tmp"
  grep -v '^#' "$ours" >>"$stages.tmp"
  mv "$stages.tmp" "$stages"
fi
ln -sfn "cache/$(basename "$stages")" "$bindir/kwok-stages.yaml"

# Drop what no link points to any more (builds of earlier versions); each
# Kubernetes binary weighs over 100 MB.
for f in "$bindir"/cache/*; do
  base=$(basename "$f")
  [[ "$base" =~ ^(.+)-[0-9a-f]{12}(\.yaml)?$ ]] || continue
  link="$bindir/${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
  if [[ -L "$link" && "$(readlink "$link")" != "cache/$base" ]]; then
    echo "removing stale $base"
    rm -f "$f"
  fi
done
echo "tools ready in $bindir ($((SECONDS - total))s)"
