// Package manifests holds what a cluster admin applies to run the controller
// in a cluster: the namespace, the service account, least-privilege RBAC, the
// metrics Service, the Deployment, its NetworkPolicies and the ServiceMonitor,
// as numbered YAML files in apply order (kubectl apply -f manifests/). The
// package embeds the same files, so tests (the least-privilege end-to-end
// test among them) use exactly what admins do. The ServiceMonitor's schema is
// checked by the module in manifests/schema.
package manifests
