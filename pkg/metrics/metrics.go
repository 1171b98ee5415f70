// Package metrics holds the controller's Prometheus collectors, created unregistered so an embedder can use
// its own registry. The standalone binary registers them before leader election, so a standby serves them too.
package metrics

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

const (
	// Namespace is the prefix of every metric name.
	Namespace = "runtime_extractor"
	// DevVersion is the version of a binary built with no -ldflags -X value nor module version ("(devel)").
	DevVersion = "v0.0.0-dev"
	// StateHolding is the series that is 1 instead of any state while the controller holds (status.Snapshot.Holding).
	StateHolding = "Holding"
	// Drift kinds, the values of the drift_events_total "kind" label.
	DriftModified = "modified" // a spec change made by someone else
	DriftDeleted  = "deleted"
	DriftMetadata = "metadata" // an owned label or annotation removed or changed
	// Action results, the values of the actions_total "result" label.
	ResultSuccess = "success"
	ResultError   = "error"
	// Values of the repairs_total "manager" label that name no field manager.
	UnknownManager = "unknown" // a deletion, or a change no managedFields entry names
	OtherManager   = "other"   // any manager once MaxManagers values are taken
	// MaxManagers bounds the manager values besides OtherManager: a hostile client must not grow the series.
	MaxManagers     = 10
	maxManagerBytes = 128 // bounds a label value; the API server allows 128 characters
)

// Metrics is the set of collectors of one controller, safe for concurrent use.
type Metrics struct {
	state, degraded                                                   *prometheus.GaugeVec
	transitions, driftEvents, actions, repairs                        *prometheus.CounterVec
	actionDuration                                                    *prometheus.HistogramVec
	retryBackoff, lastTransitionTime, rolloutStuck, conflictingWriter prometheus.Gauge

	mu         sync.Mutex // guards the fields below; keeps the one-hot state gauge consistent under concurrent transitions
	current    fsm.State  // shown unless holding
	holding    bool
	now        func() time.Time // tests replace it
	managers   map[string]bool  // the repairs_total label values given out
	legacyDone bool             // RegisterLegacy succeeded
}

// New returns the collectors, unregistered, with the state, drift and Apply/Delete action series at 0 for rate().
func New() *Metrics {
	m := &Metrics{now: time.Now, managers: map[string]bool{}}
	m.state = gaugeVec("state", []string{"state"},
		"Current state of the runtime extractor state machine: 1 for the current state, 0 for the others; Holding is 1 instead while an invalid insights-config, with no valid one seen since the start, keeps the controller from acting.")
	m.transitions = counterVec("transitions_total", []string{"from", "to", "event"},
		"Events processed by the state machine, by source state, target state and event; from equals to for events that keep the state.")
	m.driftEvents = counterVec("drift_events_total", []string{"kind"},
		"Changes to the managed DaemonSet made by someone other than the controller, by kind (modified, deleted, metadata).")
	m.actions = counterVec("actions_total", []string{"action", "result"},
		"Actions the controller executed against the cluster, by action and result (success, error).")
	// The buckets span API round trips: a few milliseconds when healthy, up to the client timeout when not.
	m.actionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "action_duration_seconds",
		Help:    "Time taken by the actions the controller executed against the cluster, by action.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 13)}, []string{"action"})
	m.retryBackoff = gauge("retry_backoff_seconds", "Delay before the next retry of a failed action; 0 when no retry is pending.")
	m.lastTransitionTime = gauge("last_transition_timestamp_seconds",
		"Unix time of the last change of the state machine's state; 0 before the first change.")
	m.rolloutStuck = gauge("rollout_stuck",
		"1 while the rollout of the last applied DaemonSet generation has made no progress for the rollout deadline (RuntimeExtractorDegraded=True, reason RolloutStuck), else 0.")
	m.repairs = counterVec("repairs_total", []string{"manager"},
		`Repairs of changes made by someone else, by the field manager that made them (from managedFields; "unknown" for a deletion or a change no entry names; at most 10 values, then "other").`)
	m.degraded = gaugeVec("degraded", []string{"reason"},
		"1 for the reason of RuntimeExtractorDegraded while it is True (ApplyFailed, DeleteFailed, ConflictingWriter, RolloutStuck, InvalidConfig), 0 for the others; all 0 while it is not.")
	m.conflictingWriter = gauge("conflicting_writer",
		"1 while another writer keeps undoing the controller's repairs of the DaemonSet and repairs back off (a tug-of-war; RuntimeExtractorDegraded names it with reason ConflictingWriter), else 0.")
	m.SetDegraded("")
	m.SetState("") // every state series at 0
	for _, kind := range []string{DriftModified, DriftDeleted, DriftMetadata} {
		m.driftEvents.WithLabelValues(kind)
	}
	for _, a := range []fsm.Action{fsm.ActionApply, fsm.ActionDelete} {
		m.actions.WithLabelValues(string(a), ResultSuccess)
		m.actions.WithLabelValues(string(a), ResultError)
		m.actionDuration.WithLabelValues(string(a))
	}
	return m
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
}

func gaugeVec(name string, labels []string, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func counterVec(name string, labels []string, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

// SetState marks the initial state s as current, counting no transition.
func (m *Metrics) SetState(s fsm.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setStateLocked(s)
}

// ObserveTransition records a processed event, and its time when it changed the state.
func (m *Metrics) ObserveTransition(t fsm.Transition) {
	event := ""
	if t.Event != nil {
		event = string(t.Event.Name())
	}
	m.transitions.WithLabelValues(string(t.From), string(t.To), event).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setStateLocked(t.To)
	if t.Changed() {
		m.lastTransitionTime.Set(float64(m.now().UnixNano()) / float64(time.Second))
	}
}

// SetHolding marks whether the controller holds (see StateHolding).
func (m *Metrics) SetHolding(holding bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holding = holding
	m.setStateLocked(m.current)
}

func (m *Metrics) setStateLocked(current fsm.State) {
	m.current = current
	for _, s := range fsm.States() {
		m.state.WithLabelValues(string(s)).Set(flagValue(s == current && !m.holding))
	}
	m.state.WithLabelValues(StateHolding).Set(flagValue(m.holding))
}

// ObserveDrift counts one drift event of a Drift* kind.
func (m *Metrics) ObserveDrift(kind string) { m.driftEvents.WithLabelValues(kind).Inc() }

// ObserveAction counts an executed action by its Result* and records its duration.
func (m *Metrics) ObserveAction(a fsm.Action, result string, d time.Duration) {
	m.actions.WithLabelValues(string(a), result).Inc()
	m.actionDuration.WithLabelValues(string(a)).Observe(d.Seconds())
}

// SetRolloutStuck records whether the rollout is stuck.
func (m *Metrics) SetRolloutStuck(stuck bool) { m.rolloutStuck.Set(flagValue(stuck)) }

// SetDegraded records the reason of RuntimeExtractorDegraded=True, "" when not True.
func (m *Metrics) SetDegraded(reason string) {
	for _, r := range status.DegradedReasons() {
		m.degraded.WithLabelValues(r).Set(flagValue(r == reason))
	}
}

// SetConflictingWriter records whether another writer fights over the DaemonSet.
func (m *Metrics) SetConflictingWriter(on bool) { m.conflictingWriter.Set(flagValue(on)) }

func flagValue(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// SetBackoff records the delay before the next retry, 0 when none is pending.
func (m *Metrics) SetBackoff(d time.Duration) { m.retryBackoff.Set(d.Seconds()) }

// ObserveRepair counts one repair of a change by managers: each once, and those past MaxManagers once together
// as OtherManager, however many a crafted managedFields names.
func (m *Metrics) ObserveRepair(managers ...string) {
	counted := make([]string, 0, len(managers))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, manager := range managers {
		// A label value must be valid UTF-8, or the collector panics.
		manager = strings.ToValidUTF8(manager, "?")
		if len(manager) > maxManagerBytes {
			manager = strings.ToValidUTF8(manager[:maxManagerBytes], "")
		}
		if m.managers[manager] || len(m.managers) < MaxManagers && manager != OtherManager {
			m.managers[manager] = true
		} else {
			manager = OtherManager
		}
		if !slices.Contains(counted, manager) {
			counted = append(counted, manager)
			m.repairs.WithLabelValues(manager).Inc()
		}
	}
}

// Collectors returns every collector, in creation order, for an embedder that registers them itself.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.state, m.transitions, m.driftEvents, m.actions, m.actionDuration, m.retryBackoff,
		m.lastTransitionTime, m.rolloutStuck, m.repairs, m.degraded, m.conflictingWriter}
}

// MustRegister registers every collector with reg and panics if one cannot be.
func (m *Metrics) MustRegister(reg prometheus.Registerer) { reg.MustRegister(m.Collectors()...) }

// Register registers every collector with reg, or none (see RegisterAll).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	return RegisterAll(reg, m.Collectors()...)
}

// RegisterLegacy registers every collector in component-base's legacy registry (library-go's /metrics), once per
// Metrics; a second Metrics fails on the names and leaves the first served.
func (m *Metrics) RegisterLegacy() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.legacyDone {
		return nil
	}
	// Not RawMustRegister: it marks them resettable, and a DELETE on /metrics would drop the pre-initialised series.
	err := m.Register(legacyregistry.Registerer())
	m.legacyDone = err == nil
	return err
}

// RegisterAll registers collectors with reg, all or none: a failure undoes this call.
func RegisterAll(reg prometheus.Registerer, collectors ...prometheus.Collector) error {
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register runtime extractor metrics: %w", err)
		}
	}
	return nil
}

// NewBuildInfo returns the build_info gauge of version (DevVersion when empty); an embedder has its own.
func NewBuildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Constant 1, labelled with the version of the runtime extractor controller binary and the Go version that built it.",
		ConstLabels: prometheus.Labels{"version": cmp.Or(version, DevVersion), "go_version": runtime.Version()}})
	g.Set(1)
	return g
}
