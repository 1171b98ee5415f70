// Package manifests holds what a cluster admin applies to run the controller
// in a cluster: the namespace, the service account, least-privilege RBAC, the
// metrics Service, the Deployment, its NetworkPolicies, the ServiceMonitor and
// the PrometheusRule of the alerts, as numbered YAML files in apply order
// (kubectl apply -f manifests/). The package embeds the same files, so tests
// (the least-privilege end-to-end test among them) use exactly what admins
// do. The custom resources' schemas are checked by the module in
// manifests/schema, the alerts by the one in manifests/rules.
package manifests
