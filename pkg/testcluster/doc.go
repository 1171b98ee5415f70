// Package testcluster runs a real, local Kubernetes control plane for tests and
// for `make run`: etcd, kube-apiserver, kube-controller-manager (its default
// controllers), kube-scheduler and kwok, which plays the kubelet for N fake Linux
// nodes. All of them are OS processes built from Go modules by `make tools`
// (hack/build-tools.sh) into the repository's bin/.
//
// On top of plain Kubernetes it provides what OpenShift's platform would: the
// config.openshift.io CRDs ClusterVersion, ClusterOperator, APIServer and
// Infrastructure (from the github.com/openshift/api module), their singletons,
// the openshift-insights namespace with the insights-runtime-extractor-sa
// ServiceAccount, the openshift-user-critical PriorityClass, and SCC admission
// for the runtime extractor: the host's ClusterRole and binding that grant that
// ServiceAccount use of the SCC insights-runtime-extractor-scc, and a
// ValidatingAdmissionPolicy that refuses, in openshift-insights, the pods and
// pod templates that the SCC would refuse, with the facts of the host's SCC
// (testdata/host-scc.yaml), and those whose ServiceAccount may not use it or
// that require an SCC that does not exist (SCCPolicy).
//
// Start returns once everything is ready; Stop ends exactly the processes Start
// launched, by PID. Tests use ForTest, which stops the cluster in t.Cleanup and
// turns missing binaries into a failure that says to run `make tools` (or a skip
// with E2E_SKIP=1).
package testcluster
