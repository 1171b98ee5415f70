// Package rules tests the alerts of manifests/09-prometheusrule.yaml with
// Prometheus's own rule engine, the one `promtool test rules` runs: the
// rules are read from the PrometheusRule's spec.groups and parsed by rulefmt
// (as Prometheus loads a rule file), then evaluated step by step over the
// synthetic series of testdata/alerts_test.yaml, a test file in promtool's
// format, which says at each time which alerts fire, with their labels and
// annotations. Every alert must be shown both firing and not firing, must
// have a runbook section in docs/runbooks.md, and may name only metrics
// that the controller's binary registers (pkg/metrics).
//
// It is a module of its own so that Prometheus's server packages stay out of
// the controller's dependency graph; `make test` runs it (the rules target).
package rules
