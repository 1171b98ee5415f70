package metrics

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

var allNames = []string{
	"runtime_extractor_state",
	"runtime_extractor_transitions_total",
	"runtime_extractor_drift_events_total",
	"runtime_extractor_actions_total",
	"runtime_extractor_action_duration_seconds",
	"runtime_extractor_retry_backoff_seconds",
	"runtime_extractor_last_transition_timestamp_seconds",
	"runtime_extractor_rollout_stuck",
	"runtime_extractor_repairs_total",
	"runtime_extractor_degraded",
	"runtime_extractor_conflicting_writer",
}

const stateHeader = `# HELP runtime_extractor_state Current state of the runtime extractor state machine: 1 for the current state, 0 for the others; Holding is 1 instead while an invalid insights-config, with no valid one seen since the start, keeps the controller from acting.
# TYPE runtime_extractor_state gauge
`

// stateSeries renders the expected state gauge with current set to 1 ("" = none).
func stateSeries(current fsm.State) string {
	var b strings.Builder
	b.WriteString(stateHeader)
	for _, s := range append(fsm.States(), StateHolding) {
		v := 0
		if s == current {
			v = 1
		}
		fmt.Fprintf(&b, "runtime_extractor_state{state=%q} %d\n", s, v)
	}
	return b.String()
}

// Holding replaces the machine's state in the gauge while it lasts, and
// gives it back after.
func TestHoldingReplacesTheState(t *testing.T) {
	m := New()
	m.SetState(fsm.StateDisabled)
	m.SetHolding(true)
	require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(StateHolding))))
	m.ObserveTransition(fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}})
	require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(StateHolding))))
	m.SetHolding(false)
	require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(fsm.StateDeploying))))
}

func TestNewPresetsSeriesAtZero(t *testing.T) {
	m := New()

	require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(""))))
	require.NoError(t, testutil.CollectAndCompare(m.driftEvents, strings.NewReader(`
# HELP runtime_extractor_drift_events_total Changes to the managed DaemonSet made by someone other than the controller, by kind (modified, deleted, metadata).
# TYPE runtime_extractor_drift_events_total counter
runtime_extractor_drift_events_total{kind="deleted"} 0
runtime_extractor_drift_events_total{kind="metadata"} 0
runtime_extractor_drift_events_total{kind="modified"} 0
`)))
	assert.Equal(t, 4, testutil.CollectAndCount(m.actions), "Apply and Delete × success and error")
	assert.Equal(t, 0, testutil.CollectAndCount(m.transitions), "no transition is invented")
	assert.Zero(t, testutil.ToFloat64(m.retryBackoff))
	assert.Zero(t, testutil.ToFloat64(m.lastTransitionTime))
}

func TestSetStateMarksExactlyOneState(t *testing.T) {
	m := New()
	m.SetState(fsm.StateRunning)
	require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(fsm.StateRunning))))
	assert.Equal(t, 0, testutil.CollectAndCount(m.transitions), "SetState is not a transition")
	assert.Zero(t, testutil.ToFloat64(m.lastTransitionTime))
}

func TestScriptedTransitions(t *testing.T) {
	m := New()
	clock := time.Unix(1700000000, 0)
	m.now = func() time.Time { return clock }
	m.SetState(fsm.StateDisabled)

	steps := []struct {
		tr       fsm.Transition
		wantTime time.Time // last-transition timestamp after the step
	}{
		{fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}, Action: fsm.ActionApply}, time.Unix(1700000010, 0)},
		{fsm.Transition{From: fsm.StateDeploying, To: fsm.StateDeploying, Event: fsm.Applied{Generation: 1}, Action: fsm.ActionNone}, time.Unix(1700000010, 0)},
		{fsm.Transition{From: fsm.StateDeploying, To: fsm.StateRunning, Event: fsm.RolloutComplete{Generation: 1}, Action: fsm.ActionNone}, time.Unix(1700000030, 0)},
		{fsm.Transition{From: fsm.StateRunning, To: fsm.StateDrifted, Event: fsm.Deleted{}, Action: fsm.ActionApply}, time.Unix(1700000040, 0)},
		{fsm.Transition{From: fsm.StateDrifted, To: fsm.StateDrifted, Event: fsm.ApplyFailed{Err: errors.New("forbidden")}, Action: fsm.ActionRetry}, time.Unix(1700000040, 0)},
		{fsm.Transition{From: fsm.StateDrifted, To: fsm.StateDrifted, Event: fsm.ApplyFailed{Err: errors.New("forbidden")}, Action: fsm.ActionRetry}, time.Unix(1700000040, 0)},
		{fsm.Transition{From: fsm.StateDrifted, To: fsm.StateRunning, Event: fsm.RolloutComplete{Generation: 2}, Action: fsm.ActionNone}, time.Unix(1700000070, 0)},
	}
	for i, step := range steps {
		clock = time.Unix(1700000000+int64(i+1)*10, 0)
		m.ObserveTransition(step.tr)
		require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(step.tr.To))), "step %d", i)
		assert.Equal(t, float64(step.wantTime.Unix()), testutil.ToFloat64(m.lastTransitionTime), "step %d", i)
	}

	require.NoError(t, testutil.CollectAndCompare(m.transitions, strings.NewReader(`
# HELP runtime_extractor_transitions_total Events processed by the state machine, by source state, target state and event; from equals to for events that keep the state.
# TYPE runtime_extractor_transitions_total counter
runtime_extractor_transitions_total{event="Applied",from="Deploying",to="Deploying"} 1
runtime_extractor_transitions_total{event="ApplyFailed",from="Drifted",to="Drifted"} 2
runtime_extractor_transitions_total{event="Deleted",from="Running",to="Drifted"} 1
runtime_extractor_transitions_total{event="Enabled",from="Disabled",to="Deploying"} 1
runtime_extractor_transitions_total{event="RolloutComplete",from="Deploying",to="Running"} 1
runtime_extractor_transitions_total{event="RolloutComplete",from="Drifted",to="Running"} 1
`)))
}

// The gauge must follow the real machine whatever its table says, when wired the
// way the controller wires it.
func TestStateFollowsMachine(t *testing.T) {
	m := New()
	machine := fsm.New(fsm.StateDisabled)
	m.SetState(machine.State())
	machine.OnTransition(m.ObserveTransition)

	events := []fsm.Event{
		fsm.Enabled{}, fsm.Applied{Generation: 1}, fsm.RolloutComplete{Generation: 1},
		fsm.Modified{Generation: 2}, fsm.Applied{Generation: 3}, fsm.RolloutComplete{Generation: 3},
		fsm.Disabled{}, fsm.DeleteDone{},
	}
	for _, ev := range events {
		_, err := machine.Fire(ev)
		require.NoError(t, err, "fire %s", fsm.Describe(ev))
		require.NoError(t, testutil.CollectAndCompare(m.state, strings.NewReader(stateSeries(machine.State()))),
			"after %s", fsm.Describe(ev))
	}
	assert.Positive(t, testutil.CollectAndCount(m.transitions))
}

func TestConcurrentTransitionsKeepOneStateSet(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := fsm.States()[i%len(fsm.States())]
			m.ObserveTransition(fsm.Transition{From: fsm.StateRunning, To: to, Event: fsm.Enabled{}})
		}()
	}
	wg.Wait()

	ones := 0
	for _, s := range fsm.States() {
		if testutil.ToFloat64(m.state.WithLabelValues(string(s))) == 1 {
			ones++
		}
	}
	assert.Equal(t, 1, ones)
}

func TestObserveDrift(t *testing.T) {
	m := New()
	m.ObserveDrift(DriftModified)
	m.ObserveDrift(DriftModified)
	m.ObserveDrift(DriftDeleted)

	assert.Equal(t, 2.0, testutil.ToFloat64(m.driftEvents.WithLabelValues(DriftModified)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.driftEvents.WithLabelValues(DriftDeleted)))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.driftEvents.WithLabelValues(DriftMetadata)))
}

func TestObserveAction(t *testing.T) {
	m := New()
	m.ObserveAction(fsm.ActionApply, ResultSuccess, 20*time.Millisecond)
	m.ObserveAction(fsm.ActionApply, ResultError, 3*time.Second)
	m.ObserveAction(fsm.ActionApply, ResultSuccess, 10*time.Millisecond)
	m.ObserveAction(fsm.ActionDelete, ResultSuccess, 5*time.Millisecond)

	require.NoError(t, testutil.CollectAndCompare(m.actions, strings.NewReader(`
# HELP runtime_extractor_actions_total Actions the controller executed against the cluster, by action and result (success, error).
# TYPE runtime_extractor_actions_total counter
runtime_extractor_actions_total{action="Apply",result="error"} 1
runtime_extractor_actions_total{action="Apply",result="success"} 2
runtime_extractor_actions_total{action="Delete",result="error"} 0
runtime_extractor_actions_total{action="Delete",result="success"} 1
`)))

	apply := histogram(t, m.actionDuration, "Apply")
	assert.Equal(t, uint64(3), apply.GetSampleCount())
	assert.InDelta(t, 3.03, apply.GetSampleSum(), 1e-9)
	assert.Equal(t, uint64(2), cumulativeCount(apply, 0.02), "two applies took at most 20ms")

	del := histogram(t, m.actionDuration, "Delete")
	assert.Equal(t, uint64(1), del.GetSampleCount())
	assert.InDelta(t, 0.005, del.GetSampleSum(), 1e-9)
}

func TestSetBackoff(t *testing.T) {
	m := New()
	m.SetBackoff(8 * time.Second)
	assert.Equal(t, 8.0, testutil.ToFloat64(m.retryBackoff))
	m.SetBackoff(1500 * time.Millisecond)
	assert.Equal(t, 1.5, testutil.ToFloat64(m.retryBackoff))
	m.SetBackoff(0)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.retryBackoff))
}

func TestRegisterOnFreshRegistryAndLint(t *testing.T) {
	m := New()
	reg := prometheus.NewPedanticRegistry()
	m.MustRegister(reg)
	// transitions_total and repairs_total have no series before the first
	// observation; give them one.
	m.ObserveTransition(fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}, Action: fsm.ActionApply})
	m.ObserveRepair("kubectl-patch")

	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	assert.ElementsMatch(t, allNames, got)

	for _, c := range m.Collectors() {
		problems, err := testutil.CollectAndLint(c)
		require.NoError(t, err)
		assert.Empty(t, problems)
	}

	assert.Panics(t, func() { m.MustRegister(reg) }, "a second registration in the same registry must clash")
	assert.NotPanics(t, func() { New().MustRegister(prometheus.NewRegistry()) }, "each registry takes its own set")
}

// legacy is the one Metrics of this test binary in the legacy registry, which
// is process-wide: each test that needs it there shares it.
var legacy = sync.OnceValues(func() (*Metrics, error) {
	m := New()
	return m, m.RegisterLegacy()
})

func TestRegisterLegacyIsIdempotent(t *testing.T) {
	m, err := legacy()
	require.NoError(t, err)
	m.SetBackoff(2 * time.Second)
	m.ObserveTransition(fsm.Transition{From: fsm.StateDisabled, To: fsm.StateDeploying, Event: fsm.Enabled{}, Action: fsm.ActionApply})
	m.ObserveRepair("kubectl-patch")
	require.NoError(t, m.RegisterLegacy(), "the same Metrics again is a no-op")

	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	served := map[string]*dto.MetricFamily{}
	var names []string
	for _, f := range families {
		served[f.GetName()] = f
		names = append(names, f.GetName())
	}
	assert.Subset(t, names, allNames)
	backoff := served["runtime_extractor_retry_backoff_seconds"]
	require.NotNil(t, backoff)
	assert.Equal(t, 2.0, backoff.GetMetric()[0].GetGauge().GetValue())
}

func histogram(t *testing.T, vec *prometheus.HistogramVec, action string) *dto.Histogram {
	t.Helper()
	obs, err := vec.GetMetricWithLabelValues(action)
	require.NoError(t, err)
	var out dto.Metric
	require.NoError(t, obs.(prometheus.Metric).Write(&out))
	require.NotNil(t, out.GetHistogram())
	return out.GetHistogram()
}

func cumulativeCount(h *dto.Histogram, upperBound float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == upperBound {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// TestSecondRegistrationIsAnError: a second set of collectors in a registry
// that already has one is refused with an error, not a panic, and leaves the
// first set served.
func TestSecondRegistrationIsAnError(t *testing.T) {
	first, err := legacy()
	require.NoError(t, err)
	require.NotPanics(t, func() { err = New().RegisterLegacy() }, "a second Metrics in the legacy registry")
	assert.Error(t, err, "a second Metrics in the legacy registry")
	require.NoError(t, first.RegisterLegacy(), "the same Metrics again is a no-op")
	states, err := testutil.GatherAndCount(legacyregistry.DefaultGatherer, "runtime_extractor_state")
	require.NoError(t, err)
	assert.Equal(t, len(fsm.States())+1, states, "the first set is still served") // and Holding

	reg := prometheus.NewPedanticRegistry()
	first = New()
	first.SetBackoff(3 * time.Second)
	require.NoError(t, first.Register(reg))
	require.NotPanics(t, func() { err = New().Register(reg) })
	assert.Error(t, err, "a second Metrics in the same registry")
	require.NotPanics(t, func() { err = first.Register(reg) })
	assert.Error(t, err, "the same Metrics twice in one registry")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP runtime_extractor_retry_backoff_seconds Delay before the next retry of a failed action; 0 when no retry is pending.
# TYPE runtime_extractor_retry_backoff_seconds gauge
runtime_extractor_retry_backoff_seconds 3
`), "runtime_extractor_retry_backoff_seconds"), "the first set is still served")
}

// TestRegisterAllIsAllOrNothing: when a later collector clashes, the earlier ones
// of the same call are unregistered again.
func TestRegisterAllIsAllOrNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := NewBuildInfo("v1.0.0")
	require.NoError(t, reg.Register(taken))
	m := New()
	err := RegisterAll(reg, append(m.Collectors(), NewBuildInfo("v1.0.0"))...)
	require.Error(t, err)
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1, "only the build info registered first is left")
	assert.Equal(t, "runtime_extractor_build_info", families[0].GetName())
	require.NoError(t, m.Register(reg), "the rolled-back collectors register cleanly")
}

func TestBuildInfo(t *testing.T) {
	for version, want := range map[string]string{"v1.2.3": "v1.2.3", "": DevVersion} {
		require.NoError(t, testutil.CollectAndCompare(NewBuildInfo(version), strings.NewReader(fmt.Sprintf(`
# HELP runtime_extractor_build_info Constant 1, labelled with the version of the runtime extractor controller binary and the Go version that built it.
# TYPE runtime_extractor_build_info gauge
runtime_extractor_build_info{go_version=%q,version=%q} 1
`, runtime.Version(), want))))
		problems, err := testutil.CollectAndLint(NewBuildInfo(version))
		require.NoError(t, err)
		assert.Empty(t, problems)
	}
}

// A field manager's name is any string a client chooses: 1,000 distinct names
// make at most 11 series (ten names, then "other"), and every repair is
// counted. A name that is not valid UTF-8 does not panic the collector.
func TestRepairsManagerCardinalityIsCapped(t *testing.T) {
	m := New()
	assert.Equal(t, 0, testutil.CollectAndCount(m.repairs), "series are created lazily")
	for i := range 1000 {
		m.ObserveRepair(fmt.Sprintf("manager-%04d", i))
	}
	m.ObserveRepair("manager-0003") // one of the first ten keeps its own series
	m.ObserveRepair("bad\xff" + strings.Repeat("x", 1000))
	assert.LessOrEqual(t, testutil.CollectAndCount(m.repairs), 11)
	assert.Equal(t, 11, testutil.CollectAndCount(m.repairs))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.repairs.WithLabelValues("manager-0003")))
	assert.Equal(t, 991.0, testutil.ToFloat64(m.repairs.WithLabelValues(OtherManager)))
}

// One repair of a change many managers made (managedFields is the client's
// to write) adds at most one to "other", and one to each named manager,
// however often the repair names it.
func TestOneRepairCountsOtherOnce(t *testing.T) {
	m := New()
	for i := range MaxManagers - 1 {
		m.ObserveRepair(fmt.Sprintf("earlier-%d", i))
	}
	many := []string{"kubectl-patch", "kubectl-patch"}
	for i := range 40 {
		many = append(many, fmt.Sprintf("crafted-%02d", i))
	}
	m.ObserveRepair(many...)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.repairs.WithLabelValues("kubectl-patch")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.repairs.WithLabelValues(OtherManager)))
	m.ObserveRepair(OtherManager, "crafted-00")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.repairs.WithLabelValues(OtherManager)))
	assert.Equal(t, MaxManagers+1, testutil.CollectAndCount(m.repairs))
}

func TestSetDegradedMarksOneReason(t *testing.T) {
	m := New()
	want := func(current string) string {
		var b strings.Builder
		b.WriteString("# HELP runtime_extractor_degraded 1 for the reason of RuntimeExtractorDegraded while it is True (ApplyFailed, DeleteFailed, ConflictingWriter, RolloutStuck, InvalidConfig), 0 for the others; all 0 while it is not.\n# TYPE runtime_extractor_degraded gauge\n")
		for _, r := range slices.Sorted(slices.Values(status.DegradedReasons())) {
			v := 0
			if r == current {
				v = 1
			}
			fmt.Fprintf(&b, "runtime_extractor_degraded{reason=%q} %d\n", r, v)
		}
		return b.String()
	}
	require.NoError(t, testutil.CollectAndCompare(m.degraded, strings.NewReader(want(""))), "at start")
	m.SetDegraded(status.ReasonConflictingWriter)
	require.NoError(t, testutil.CollectAndCompare(m.degraded, strings.NewReader(want(status.ReasonConflictingWriter))))
	m.SetDegraded(status.ReasonRolloutStuck)
	require.NoError(t, testutil.CollectAndCompare(m.degraded, strings.NewReader(want(status.ReasonRolloutStuck))))
	m.SetDegraded("")
	require.NoError(t, testutil.CollectAndCompare(m.degraded, strings.NewReader(want(""))), "not degraded")
}

func TestSetConflictingWriter(t *testing.T) {
	m := New()
	for _, on := range []bool{false, true, false} {
		m.SetConflictingWriter(on)
		want := 0.0
		if on {
			want = 1
		}
		assert.Equal(t, want, testutil.ToFloat64(m.conflictingWriter))
	}
}
