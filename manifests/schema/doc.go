// Package schema checks the custom resources of manifests/ (the
// ServiceMonitor and the PrometheusRule), which the local cluster has no CRD
// for, against the schema of their CRD as the Prometheus Operator's Go
// module ships it, the way the API server would: unknown fields, types,
// enums, patterns and CEL rules.
//
// It is a module of its own so that the Prometheus Operator and
// apiextensions-apiserver stay out of the controller's dependency graph;
// `make test` runs it (the schema target).
package schema
