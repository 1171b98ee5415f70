// Package e2e runs the real controller binary against the local real cluster
// (pkg/testcluster): etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok fake nodes. `make test` runs it; E2E_SKIP=1 opts out
// (the tests then skip and say so).
//
// The suite starts two clusters (E2E_CLUSTERS=<n> changes that) and runs two
// tests at a time, each on a cluster it holds alone for its whole run
// (holdCluster): most of a test's time is spent waiting on the controller's
// real timers, which two cores can do side by side. A test that changes what
// this process shares (its environment, klog's output) holds its cluster with
// holdClusterAlone and runs alone, before the parallel ones.
//
// The controllers run at the binary's defaults, the 10-minute resync
// included: a test must not pass thanks to a timer users do not have. The one
// exception is a short leader election lease, so that a successor does not
// wait minutes for a killed process's lease. Only the test of a timer
// shortens it: TestResyncRepairsWhatTheBackoffWouldDelay runs --resync 5s.
//
// TestSoakRandomKills is not part of the suite: `make soak` runs it.
package e2e
