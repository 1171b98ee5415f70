package testcluster

import "testing"

const exposition = `# HELP runtime_extractor_actions_total Actions carried out.
# TYPE runtime_extractor_actions_total counter
runtime_extractor_actions_total{action="Apply",result="success"} 7
runtime_extractor_actions_total{action="Apply",result="error"} 2
runtime_extractor_actions_total{action="Delete",result="success"} 1
# HELP runtime_extractor_actions_total_extra A longer name with the same prefix.
# TYPE runtime_extractor_actions_total_extra counter
runtime_extractor_actions_total_extra{action="Apply",result="success"} 100
# HELP runtime_extractor_state The current state.
# TYPE runtime_extractor_state gauge
runtime_extractor_state{state="Deploying"} 0
runtime_extractor_state{state="Running"} 1
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.2e+07
# HELP runtime_extractor_action_duration_seconds How long actions took.
# TYPE runtime_extractor_action_duration_seconds histogram
runtime_extractor_action_duration_seconds_bucket{action="Apply",le="+Inf"} 9
runtime_extractor_action_duration_seconds_sum{action="Apply"} 0.5
runtime_extractor_action_duration_seconds_count{action="Apply"} 9
`

func TestMetricsSumsByLabelsAndReadsTheState(t *testing.T) {
	m, err := ParseMetrics(exposition)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{MetricActions, nil, 10},
		{MetricActions, []string{"action", "Apply"}, 9},
		{MetricActions, []string{"action", "Apply", "result", "error"}, 2},
		{MetricActions, []string{"result", "success"}, 8},
		{MetricActions, []string{"action", "Nothing"}, 0},
		{MetricRSS, nil, 42e6},
		{"runtime_extractor_action_duration_seconds", []string{"action", "Apply"}, 9},
		{"absent_total", nil, 0},
	} {
		if got := m.Sum(c.name, c.labels...); got != c.want {
			t.Errorf("#%d: Sum(%s, %q) = %g, want %g", i, c.name, c.labels, got, c.want)
		}
	}
	if s := m.State(); s != "Running" {
		t.Errorf("State() = %q, want Running", s)
	}
	if !m.Has(MetricRSS) || m.Has("absent_total") {
		t.Errorf("Has: wrong answer for present or absent families")
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	if _, err := ParseMetrics("not a metric line {\n"); err == nil {
		t.Fatal("no error for a malformed exposition")
	}
}
