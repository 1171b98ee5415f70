#!/usr/bin/env bash
# Builds the local cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) from the Go module proxy into bin/, keyed by the hash of each
# tool module's go.mod/go.sum and the Go version: a binary is rebuilt only when its
# version changes. A cold build takes ~15 minutes on 2 cores; progress is printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bindir="$root/bin"
mkdir -p "$bindir/cache"
gover=$(go env GOVERSION)

# name  module-dir  package
tools=(
  "etcd etcd ."
  "kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler kube k8s.io/kubernetes/cmd/kube-scheduler"
  "kwok kwok sigs.k8s.io/kwok/cmd/kwok"
)

key_of() { # module dir -> short version key
  cat "$root/hack/tools/$1/go.mod" "$root/hack/tools/$1/go.sum" <(echo "$gover") | sha256sum | cut -c1-12
}

for entry in "${tools[@]}"; do
  read -r name dir pkg <<<"$entry"
  out="$bindir/cache/$name-$(key_of "$dir")"
  if [[ ! -x "$out" ]]; then
    echo "building $name (cold builds take minutes; progress every 30s)..."
    start=$SECONDS
    ( while sleep 30; do echo "  ... still building $name ($((SECONDS - start))s)"; done ) &
    ticker=$!
    if ! (cd "$root/hack/tools/$dir" && go build -trimpath -o "$out.tmp" "$pkg"); then
      kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
      echo "build of $name failed" >&2; exit 1
    fi
    kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
    mv "$out.tmp" "$out"
    echo "built $name in $((SECONDS - start))s"
  fi
  ln -sf "cache/$(basename "$out")" "$bindir/$name"
done

# kwok's stage files (node fast, node heartbeat, pod fast) ship inside its module.
kwokdir=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
stages="$bindir/kwok-stages.yaml"
if [[ ! -s "$stages" || "$kwokdir" -nt "$stages" ]]; then
  : >"$stages.tmp"
  for f in $(find "$kwokdir/kustomize/stage" -name '*.yaml' | grep -E '/(node/fast|node/heartbeat|pod/fast)/' | sort); do
    echo "---" >>"$stages.tmp"; cat "$f" >>"$stages.tmp"
  done
  mv "$stages.tmp" "$stages"
fi
echo "tools ready in $bindir"
