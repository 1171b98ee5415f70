// Package e2e runs the real controller binary against the local real cluster
// (pkg/testcluster): etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok fake nodes. `make test` runs it; E2E_SKIP=1 opts out
// (the tests then skip and say so).
package e2e
