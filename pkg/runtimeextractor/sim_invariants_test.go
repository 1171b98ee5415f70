package runtimeextractor

// The convergence model's invariants: settling, convergence, honest status.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// ---- settling and the final invariants ----

// settle lets the world calm down without the resync: the API heals, every
// event is delivered and handled, retries fire, rollouts finish. Nothing is
// lost in this simulation, so the controller must converge without a resync.
func (s *propSim) settle() bool {
	for _, v := range []string{"create", "update", "delete"} {
		s.setRefused(v, false)
	}
	for range 100 {
		if len(s.violations) > 0 {
			return false
		}
		switch {
		case len(s.inFlight) > 0:
			s.deliver(len(s.inFlight))
		case len(s.ready()) > 0:
			s.dispatch(pick(s.ready(), s.rng.IntN).wake)
		case s.timerDue():
		default:
			if ds := s.stored(); ds != nil && s.statusBehind(ds) {
				s.stimulus()
				s.rollOut()
				continue
			}
			return true
		}
	}
	s.violate("no-settle", "still busy after 100 settle steps")
	return false
}

// timerDue moves the clock to the loop's alarm (its earliest deadline), if one is armed.
func (s *propSim) timerDue() bool {
	at, ok := s.c.core.Deadline()
	if ok {
		s.advanceTo(at, "the loop's alarm (its earliest deadline)")
	}
	return ok
}

// expireExpectations lets the time of a resync period pass for the
// manager's expectations: an own write the cache never showed is no longer
// trusted (in the product, the expectation timer re-asserts then).
func (s *propSim) expireExpectations() {
	s.clock.SetTime(s.clock.Now().Add(10 * resources.ExpectationTimeout))
}

// checkRepairBudget: the repairs in any window of length T are at most
// the repair budget's B(T) = Burst + ⌈T / Every⌉, whatever the writers did
// (the binding windows start and end at a repair); and the gate's record of
// writers stays bounded, whatever names they used.
func (s *propSim) checkRepairBudget() {
	p := DefaultRepairPolicy()
	if n := len(s.c.core.Log().Writers()); n > core.MaxNamedWriters+2 {
		s.violate("gate-writers", fmt.Sprintf("the repair gate keeps %d writers, more than %d", n, core.MaxNamedWriters+2))
		return
	}
	r := s.repairTimes
	last := r[len(r)-1]
	for i := range r {
		if n, d := len(r)-i, last.Sub(r[i]); n > p.Bound(d) {
			s.violate("repair-budget", fmt.Sprintf("%d repairs in %s, the repair budget allows %d", n, d, p.Bound(d)))
			return
		}
	}
}

func (s *propSim) settleAndCheck() {
	s.logf("--- settle (no resync) ---")
	if !s.settle() {
		return
	}
	if s.cfg.invalid {
		if !s.checkHonest("while the config is invalid") {
			return
		}
		s.logf("--- the admin fixes insights-config (the same value) ---")
		s.cfg.invalid, s.cfg.good = false, true
		s.notifyConfig()
		if !s.settle() {
			return
		}
	}
	if s.lossy {
		s.logf("--- resync (a relist lost someone else's change) ---")
		s.expireExpectations()
		s.tickResync()
		s.dispatch(pick(s.ready(), s.rng.IntN).wake)
		if !s.settle() {
			return
		}
	}
	if !s.checkConverged("after settling") {
		return
	}
	if s.checkRepairsCounted("settled world"); len(s.violations) > 0 {
		return
	}
	s.logf("--- resync ---")
	writes := s.controllerWrites
	s.expireExpectations()
	s.tickResync()
	s.dispatch(pick(s.ready(), s.rng.IntN).wake)
	if !s.settle() {
		return
	}
	if s.controllerWrites != writes {
		s.violate("resync-writes", fmt.Sprintf("a resync of the converged state wrote %d time(s)", s.controllerWrites-writes))
		return
	}
	if s.checkConverged("after a resync") {
		s.checkFreshAgrees()
	}
}

func (s *propSim) checkConverged(when string) bool {
	n := len(s.violations)
	if !s.checkHonest(when) {
		return false
	}
	state, srv := s.c.State(), s.stored()
	if s.cfg.disabled {
		switch {
		case state != fsm.StateDisabled:
			s.violate("final-state", fmt.Sprintf("%s: disabled but state %s", when, state))
		case srv != nil:
			s.violate("final-leftover", fmt.Sprintf("%s: disabled but the server has %s", when, describeDS(srv)))
		}
		return len(s.violations) == n
	}
	want := s.ver.Version()
	switch {
	case state != fsm.StateRunning:
		s.violate("final-state", fmt.Sprintf("%s: enabled but state %s (server: %s)", when, state, describeDS(srv)))
	case srv == nil:
		s.violate("final-missing", fmt.Sprintf("%s: enabled and Running but the server has no DaemonSet", when))
	case missingOwnedMetadata(srv) != "":
		s.violate("final-metadata-not-restored", fmt.Sprintf("%s: Running but the server's DaemonSet still lacks %s", when, missingOwnedMetadata(srv)))
	case srv.Annotations[resources.VersionAnnotation] != want:
		s.violate("final-version", fmt.Sprintf("%s: Running but the server's DaemonSet is at version %q, want %q", when, srv.Annotations[resources.VersionAnnotation], want))
	case !specDesired(srv, want, s.cfg.priority):
		s.violate("final-spec", fmt.Sprintf("%s: Running but the server's DaemonSet spec is not exactly the desired one (%s)", when, describeDS(srv)))
	case !resources.RolloutOf(srv).Complete():
		s.violate("final-rollout", fmt.Sprintf("%s: Running but %s is not rolled out", when, describeDS(srv)))
	case status.Conditions(s.c.snapshot())[2].Reason == status.ReasonConflictingWriter:
		// settle ran every timer: a streak whose repair stood for the quiet
		// period is over, and so is its fight.
		s.violate("conflicting-writer-stays", fmt.Sprintf("%s: no one else writes, yet Degraded says %s", when, status.Conditions(s.c.snapshot())[2].Message))
	}
	return len(s.violations) == n
}

// specDesired: ds's spec is exactly the desired one, at priority class
// priority, as the server stores it (with its defaults); an addition is a
// difference.
func specDesired(ds *appsv1.DaemonSet, version, priority string) bool {
	want, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: version,
		Scheduling: config.RuntimeExtractor{PriorityClassName: priority}})
	if err != nil {
		return false
	}
	fakeapi.ApplyDefaults(want)
	return equality.Semantic.DeepEqual(want.Spec, ds.Spec)
}

// checkHonest: the conditions and the state metric say nothing the cluster
// contradicts: no "disabled" while a DaemonSet is there.
func (s *propSim) checkHonest(when string) bool {
	n := len(s.violations)
	deg := status.Conditions(s.c.snapshot())[2]
	for _, r := range status.DegradedReasons() {
		want := 0.0
		if deg.Status == "True" && deg.Reason == r {
			want = 1
		}
		if v := s.metric("runtime_extractor_degraded", "reason", r); v != want {
			s.violate("metric-degraded", fmt.Sprintf("%s: runtime_extractor_degraded{reason=%s} is %v, but Degraded is %s [%s]", when, r, v, deg.Status, deg.Reason))
		}
	}
	srv := s.stored()
	if srv == nil {
		return len(s.violations) == n
	}
	if c := status.Conditions(s.c.snapshot())[0]; c.Reason == status.ReasonDisabled {
		s.violate("status-disabled-with-daemonset", fmt.Sprintf("%s: %s=%s [%s] %q, but the server has %s",
			when, c.Type, c.Status, c.Reason, c.Message, describeDS(srv)))
	}
	if v := s.stateMetric(string(fsm.StateDisabled)); v == 1 {
		s.violate("metric-disabled-with-daemonset", fmt.Sprintf("%s: runtime_extractor_state{state=Disabled} is 1, but the server has %s", when, describeDS(srv)))
	}
	return len(s.violations) == n
}

// metric reads the gauge name{label=value} from the simulator's registry;
// label "" reads the unlabelled one; -1 when absent.
func (s *propSim) metric(name, label, value string) float64 {
	v, err := gatherGauge(s.reg, name, label, value)
	s.must(err)
	return v
}

// repairsCounted sums repairs_total over its managers.
func (s *propSim) repairsCounted() float64 {
	families, err := s.reg.Gather()
	s.must(err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() == metrics.Namespace+"_repairs_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// gauge reads an unlabelled gauge from the simulator's registry.
func (s *propSim) gauge(name string) float64 {
	v := s.metric(name, "", "")
	if v < 0 {
		s.t.Fatalf("no gauge %s", name)
	}
	return v
}

// stateMetric reads runtime_extractor_state{state} (-1 when absent).
func (s *propSim) stateMetric(state string) float64 {
	return s.metric(metrics.Namespace+"_state", "state", state)
}

// gatherGauge reads the gauge (or counter) name from reg: the series whose
// label has value, or, with label "", the one without labels; -1 when absent.
func gatherGauge(reg prometheus.Gatherer, name, label, value string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			read := func() float64 {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
			if label == "" && len(m.GetLabel()) == 0 {
				return read(), nil
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return read(), nil
				}
			}
		}
	}
	return -1, nil
}

// checkFreshAgrees starts a second controller process over the same cluster
// and config, lets it settle, and compares its conditions with those of the
// controller that ran the whole history: status is a function of the cluster.
func (s *propSim) checkFreshAgrees() {
	f := &propSim{
		t: s.t, abort: s.abort, seed: s.seed, rng: rand.New(rand.NewPCG(uint64(s.seed), 0xf7e5)), rec: s.rec,
		api: s.api, cfg: &fakeConfig{disabled: s.cfg.disabled, invalid: s.cfg.invalid, good: !s.cfg.invalid, priority: s.cfg.priority},
		ver: newSettableVersion(s.ver.Version()), refused: map[string]bool{}, nodes: s.nodes, held: s.held,
		clock: clocktesting.NewFakeClock(s.clock.Now()), configHint: make(chan struct{}, 1),
		resyncTick: make(chan time.Time, 1),
	}
	w, err := s.api.Client.Tracker().Watch(fakeapi.DaemonSets, resources.Namespace)
	s.must(err)
	f.watcher = w
	f.restart()
	defer f.close()
	if !f.settle() {
		s.violate("fresh-no-settle", "a freshly started controller did not settle:\n"+strings.Join(f.log, "\n"))
		return
	}
	if f.controllerWrites > 0 {
		s.violate("fresh-writes", fmt.Sprintf("a freshly started controller wrote %d time(s) over the converged cluster:\n%s", f.controllerWrites, strings.Join(f.log, "\n")))
		return
	}
	long, fresh := status.Conditions(s.c.snapshot()), status.Conditions(f.c.snapshot())
	for i := range long {
		a, b := long[i], fresh[i]
		if a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message {
			s.violate("fresh-conditions-differ", fmt.Sprintf("%s: the long-running controller (state %s) reports %s [%s] %q, a fresh one (state %s) %s [%s] %q",
				a.Type, s.c.State(), a.Status, a.Reason, a.Message, f.c.State(), b.Status, b.Reason, b.Message))
		}
	}
}

// missingOwnedMetadata names an owned label, or an annotation of the
// manifest, that ds lacks; "" for none.
func missingOwnedMetadata(ds *appsv1.DaemonSet) string {
	if k := missingOwnedLabel(ds); k != "" {
		return "label " + k
	}
	for _, k := range resources.OwnedAnnotations() {
		if ds.Annotations[k] == "" {
			return "annotation " + k
		}
	}
	return ""
}

func missingOwnedLabel(ds *appsv1.DaemonSet) string {
	for _, k := range slices.Sorted(maps.Keys(resources.OwnedLabels())) {
		if ds.Labels[k] != resources.OwnedLabels()[k] {
			return k
		}
	}
	return ""
}
