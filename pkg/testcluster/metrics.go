package testcluster

import (
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names the harness reads from the controller's /metrics.
const (
	MetricState    = "runtime_extractor_state"
	MetricActions  = "runtime_extractor_actions_total"
	MetricDrift    = "runtime_extractor_drift_events_total"
	MetricTransits = "runtime_extractor_transitions_total"
	// MetricRSS is client_golang's process collector: the resident set size,
	// as the kernel reports it for the process.
	MetricRSS       = "process_resident_memory_bytes"
	MetricHeapInuse = "go_memstats_heap_inuse_bytes"
)

// Metrics is one scrape of a Prometheus text exposition, parsed by expfmt.
type Metrics struct {
	// Text is the exposition as served.
	Text     string
	families map[string]*dto.MetricFamily
}

// ParseMetrics parses a Prometheus text exposition.
func ParseMetrics(text string) (*Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return &Metrics{Text: text, families: families}, nil
}

// Has reports whether the exposition holds the metric family name.
func (m *Metrics) Has(name string) bool { return m.families[name] != nil }

// Sum adds up the samples of the family name whose labels include every
// name/value pair of labels, given as alternating names and values:
// Sum(MetricActions, "action", "Apply", "result", "error"). Histograms and
// summaries add up their sample counts. An absent family sums to 0.
func (m *Metrics) Sum(name string, labels ...string) float64 {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("Metrics.Sum(%q): labels %q are not name/value pairs", name, labels))
	}
	f := m.families[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, s := range f.GetMetric() {
		if hasLabels(s, labels) {
			sum += value(s)
		}
	}
	return sum
}

// State is the label of the runtime_extractor_state sample that is 1: the
// machine's current state; "" when none is.
func (m *Metrics) State() string {
	f := m.families[MetricState]
	if f == nil {
		return ""
	}
	for _, s := range f.GetMetric() {
		if value(s) != 1 {
			continue
		}
		for _, l := range s.GetLabel() {
			if l.GetName() == "state" {
				return l.GetValue()
			}
		}
	}
	return ""
}

func hasLabels(s *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Untyped != nil:
		return s.Untyped.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	case s.Summary != nil:
		return float64(s.Summary.GetSampleCount())
	}
	return 0
}
