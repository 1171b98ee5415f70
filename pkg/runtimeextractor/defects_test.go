package runtimeextractor

// Regression tests of issue 11's defects, one named test each. Every one of them
// runs at the controller's production timers (10-minute resync, default backoff):
// a shorter resync would repair what the event path drops and hide the defect.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// recordTransitions records every transition the machine takes from now on.
func recordTransitions(c *Controller) *syncList[fsm.Transition] {
	seen := &syncList[fsm.Transition]{}
	c.machine.OnTransition(seen.add)
	return seen
}

// Defect 1: an owned label removed by someone else keeps the generation, and the
// drain's own-write check took it for the controller's own write.
func TestRemovedLabelIsRestoredWithoutResync(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	ds := h.stored().DeepCopy()
	delete(ds.Labels, resources.LabelManagedBy)
	if _, err := h.api.Client.AppsV1().DaemonSets(ds.Namespace).Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitStored("the managed-by label to be restored", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	h.waitState(fsm.StateRunning)
}

// Defect 3: after the apply of a new version failed, a status-only update of the
// old object completed the "upgrade".
func TestRefusedUpgradeIsNotRunning(t *testing.T) {
	var refuse sync.Mutex
	refusing := false
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			refuse.Lock()
			defer refuse.Unlock()
			if refusing && a.GetSubresource() == "" {
				return true, nil, apierrors.NewForbidden(appsv1.Resource("daemonsets"), resources.DaemonSetName, errors.New("denied by admission policy"))
			}
			return false, nil, nil
		})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	seen := recordTransitions(h.ctrl)

	refuse.Lock()
	refusing = true
	refuse.Unlock()
	h.version.set("4.22.0")
	h.eventually("the refused apply", func() bool { return h.eventCount(ReasonApplyFailed) > 0 })

	// A status-only update of the old object: a fourth node joined and runs it.
	old := h.stored().DeepCopy()
	old.Status.DesiredNumberScheduled, old.Status.CurrentNumberScheduled = 4, 4
	old.Status.UpdatedNumberScheduled, old.Status.NumberAvailable, old.Status.NumberReady = 4, 4, 4
	if _, err := h.api.Client.AppsV1().DaemonSets(old.Namespace).UpdateStatus(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the status update to reach the controller", func() bool { return h.ctrl.Status().Desired == 4 })
	if seen.any(func(t fsm.Transition) bool { return t.To == fsm.StateRunning }) || h.ctrl.State() == fsm.StateRunning {
		t.Fatalf("a refused upgrade was reported done: %v", seen.list())
	}
	// Refused for far less than the Degraded inertia: Progressing says so, Degraded does not.
	conds := status.Conditions(h.ctrl.Status())
	if conds[2].Status != configv1.ConditionFalse || !strings.Contains(conds[1].Message, "denied by admission policy") {
		t.Errorf("a refusal within the inertia: Progressing %q, Degraded %s %s", conds[1].Message, conds[2].Status, conds[2].Reason)
	}

	refuse.Lock()
	refusing = false
	refuse.Unlock()
	h.waitStored("the new version to be applied", func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == "4.22.0"
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
}

// Defect 5: a valid change and a rejected one coalesced into one notification;
// the controller skipped the re-assert because the latest content was bad.
func TestChangeBehindRejectedConfigIsApplied(t *testing.T) {
	n := newFakeConfig()
	h := startWith(t, func(h *harness) {
		h.notifier = n
		h.limiterOverride = defaultRateLimiter() // the production backoff, as every defect here
	})
	h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })

	// The last good config disables the extractor, and the newest content (which
	// came right after it, in the same notification) was rejected.
	n.set(true, true)
	n.ch <- struct{}{}
	h.waitStored("the DaemonSet to be deleted", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	h.waitState(fsm.StateDisabled)
}

// Defect 6: our DELETE timed out client-side but succeeded; the deletion event
// must end Deleting at once instead of waiting out the backoff.
func TestDeletionEndsDeletingWithoutRetry(t *testing.T) {
	var calls atomic.Int32
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("delete", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			switch n := calls.Add(1); {
			case n <= 6: // six failures in a row: the next retry is about 6.4 s away
				return true, nil, apierrors.NewServiceUnavailable("injected")
			case n == 7: // the server deletes, the client gives up waiting
				_ = h.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName)
				return true, nil, context.DeadlineExceeded
			}
			return false, nil, nil
		})
		h.limiterOverride = defaultRateLimiter()
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)

	h.setConfig(disabledConfig)
	h.eventually("the DaemonSet to be gone", func() bool { return h.stored() == nil })
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, testwait.Patience, true,
		func(context.Context) (bool, error) { return h.ctrl.State() == fsm.StateDisabled, nil })
	if err != nil {
		t.Fatalf("still %s %s after the DaemonSet was deleted", h.ctrl.State(), testwait.Patience)
	}
}

// Defect 7: a label-only repair (the generation does not move) went
// Running -> Deploying -> Running, with an Event and a status write each.
func TestLabelRepairDoesNotRollOut(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	seen := recordTransitions(h.ctrl)

	ds := h.stored().DeepCopy()
	delete(ds.Labels, resources.LabelManagedBy)
	if _, err := h.api.Update(ds); err != nil { // stored without a watch event reaching drift
		t.Fatal(err)
	}
	h.signalVersion() // a re-assert (updateCh without a version change)
	h.waitStored("the label to be restored", func(ds *appsv1.DaemonSet) bool {
		return ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	h.waitState(fsm.StateRunning)
	if seen.any(func(t fsm.Transition) bool { return t.To == fsm.StateDeploying }) {
		t.Fatalf("a label repair went through Deploying: %v", seen.list())
	}
}

// Defect 8: the machine was fired with the Run context; once that was cancelled
// mid-action, looplab/fsm stayed "in transition" and a second Run could do nothing.
func TestRunAgainAfterCancelMidAction(t *testing.T) {
	api := fakeapi.New()
	rec := events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(time.Now()))
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	api.Client.PrependReactor("delete", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		entered <- struct{}{}
		<-release // held open while the caller's context is cancelled
		return false, nil, nil
	})
	sources, stopSources := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(api.Client, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(rec, factory)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.NewSource(api.Client, rec)
	ctrl := NewRuntimeExtractorController(cfg, nil, nil, api.Client, rec, ri,
		WithImages(resources.DefaultImages()), WithVersionSource(newSettableVersion("4.21.0")))
	factory.Start(sources.Done())
	go cfg.Run(sources)
	go ri.Run(sources, 1)
	defer func() { stopSources(); factory.Shutdown() }()

	run := func(ctx context.Context) chan struct{} {
		done := make(chan struct{})
		go func() { defer close(done); ctrl.Run(ctx) }()
		return done
	}
	first, cancelFirst := context.WithCancel(context.Background())
	done := run(first)
	waitFor(t, "the DaemonSet", func() bool { ds, _ := api.Stored(resources.Namespace, resources.DaemonSetName); return ds != nil })

	if _, err := api.Client.CoreV1().ConfigMaps(resources.Namespace).Create(context.Background(), configMap(disabledConfig), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-entered
	cancelFirst()
	close(release)
	<-done

	second, cancelSecond := context.WithCancel(context.Background())
	defer cancelSecond()
	done = run(second)
	defer func() { cancelSecond(); <-done }()
	if _, err := api.Client.CoreV1().ConfigMaps(resources.Namespace).Update(context.Background(), configMap(enabledConfig), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DaemonSet after the second Run", func() bool {
		ds, _ := api.Stored(resources.Namespace, resources.DaemonSetName)
		return ds != nil && ctrl.State() == fsm.StateDeploying
	})
}

// Defect 9: one Event per repair, not one per queued observation: three
// observations drained at once make one update, recorded once, naming both kinds.
func TestOneDriftEventPerDrain(t *testing.T) {
	h, ds := startStoppedWhenRunning(t)

	h.ctrl.informer.drift(observation{Kind: DriftModified, UID: ds.UID, Generation: ds.Generation + 1})
	h.ctrl.informer.drift(observation{Kind: DriftMetadata, UID: ds.UID, Generation: ds.Generation + 1})
	h.ctrl.informer.drift(observation{Kind: DriftModified, UID: ds.UID, Generation: ds.Generation + 2})
	tr := recordTransitions(h.ctrl)
	before := len(h.changes.with(""))
	h.ctrl.step(context.Background(), core.Input{Kind: core.InputDrift})
	if got := h.changes.with("")[before:]; len(got) > 1 {
		t.Fatalf("got %d events for one core.Drain, want at most 1: %+v", len(got), got)
	}
	modified := 0
	for _, x := range tr.list() {
		if x.Event.Name() == fsm.EventModified {
			modified++
		}
	}
	if modified != 1 {
		t.Fatalf("fired Modified %d times for one core.Drain, want 1", modified)
	}
}

// Defect 10: with a malformed insights-config and no good config seen since the
// start, the controller must change nothing: an absent DaemonSet stays absent.
func TestInvalidConfigAtStartKeepsAbsentDaemonSetAbsent(t *testing.T) {
	h := start(t, configMap("dataReporting: [not, a, mapping"))
	h.signalVersion() // handled after the start-up re-assert
	if ds := h.stored(); ds != nil {
		t.Fatalf("an invalid config at start deployed the DaemonSet (labels %v)", ds.Labels)
	}
	if h.eventCount(config.ReasonInvalidConfig) != 1 {
		t.Fatalf("no %s warning", config.ReasonInvalidConfig)
	}

	h.setConfig(enabledConfig)
	h.waitStored("the DaemonSet once a valid config arrives", func(ds *appsv1.DaemonSet) bool { return ds != nil })
}

// Defect 10: ... and a present DaemonSet is left exactly as it is.
func TestInvalidConfigAtStartLeavesPresentDaemonSetAsItIs(t *testing.T) {
	existing := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.DaemonSetName,
		Labels: map[string]string{"app": "custom"}}}
	h := startWith(t, func(h *harness) { h.api.Client.ClearActions() }, configMap("dataReporting: [not, a, mapping"), existing)
	h.signalVersion()
	if w := h.api.Count().Writes; w != 0 {
		t.Fatalf("an invalid config at start wrote %d time(s): %v", w, h.api.Count().Verbs)
	}
	if ds := h.stored(); ds == nil || ds.Labels["app"] != "custom" {
		t.Fatalf("the DaemonSet was changed: %v", ds)
	}
}

// waitFor polls cond until it holds, for up to testwait.Patience; then the test fails,
// naming what it waited for and, from each of more, what the situation was.
func waitFor(t *testing.T, what string, cond func() bool, more ...func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, testwait.Patience, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		for _, m := range more {
			what += " (" + m() + ")"
		}
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Issue 18, defect 2: a disable within ExpectationTimeout of a create, then a
// DELETE that fails fast. Once the create's expectation timed out, the loop
// re-armed its timer at zero after every failure: DELETE after DELETE, with
// no backoff. And the expectation's timer, armed before the delete, fired
// anyway, for one DELETE ahead of its backoff. Every retry keeps its backoff:
// over deleteWindow the DELETEs follow the default schedule (100 ms
// doubling), whatever was expected, and none comes before its delay.
func TestDeniedDeleteKeepsItsBackoffAfterACreate(t *testing.T) {
	const deleteWindow = 8 * time.Second // past the expectation's 5 s
	var mu sync.Mutex
	var deletes []time.Time
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("delete", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			deletes = append(deletes, time.Now())
			mu.Unlock()
			return true, nil, apierrors.NewForbidden(appsv1.Resource("daemonsets"), resources.DaemonSetName, errors.New("injected: denied by admission"))
		})
		h.limiterOverride = defaultRateLimiter()
	})
	h.waitStored("the create", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	h.setConfig(disabledConfig)
	h.eventually("the first DELETE", func() bool { mu.Lock(); defer mu.Unlock(); return len(deletes) > 0 })
	start := time.Now()
	// A window of time is what is measured here: the requests in it.
	time.Sleep(deleteWindow)
	mu.Lock()
	got := slices.Clone(deletes)
	mu.Unlock()
	// Attempts at 0, then after 0.1, 0.2, 0.4, 0.8, 1.6, 3.2 s (+10 % jitter):
	// the 7th retry would come at 12.7 s at the earliest.
	want := backoffAttempts(DefaultRetryBase, time.Since(start))
	t.Logf("%d DELETEs in %s; the backoff schedule allows %d", len(got), time.Since(start).Round(time.Millisecond), want)
	if len(got) > want {
		t.Fatalf("%d DELETEs in %s, want at most %d (the backoff schedule)", len(got), time.Since(start).Round(time.Millisecond), want)
	}
	// A timer never fires early: each retry waits at least its delay.
	delay := DefaultRetryBase
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < delay {
			t.Errorf("DELETE %d came %s after the one before, ahead of its backoff of %s", i+1, gap.Round(time.Millisecond), delay)
		}
		delay *= 2
	}
}

// backoffAttempts is how many attempts an exponential backoff from base
// (doubling, jitter only adding) allows within d: the first and each retry
// whose cumulative delay fits.
func backoffAttempts(base, d time.Duration) int {
	n, elapsed := 1, time.Duration(0)
	for delay := base; elapsed+delay <= d; delay *= 2 {
		elapsed += delay
		n++
	}
	return n
}

// Issue 18, defect 4: while holding on an invalid config, the machine stays in
// its initial state, and the state metric said Disabled for a DaemonSet that
// runs. Holding is reported as holding.
func TestHoldingIsNotReportedAsDisabled(t *testing.T) {
	existing := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.DaemonSetName}}
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collectors()...)
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithMetrics(m)) }, configMap("dataReporting: [not, a, mapping"), existing)
	h.signalVersion() // handled after the start-up re-assert and its report
	state := func(s string) float64 {
		v, err := gatherGauge(reg, metrics.Namespace+"_state", "state", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if state(string(fsm.StateDisabled)) != 0 || state(metrics.StateHolding) != 1 {
		t.Fatalf("while holding: state{Disabled}=%v, state{%s}=%v; want 0 and 1", state(string(fsm.StateDisabled)), metrics.StateHolding, state(metrics.StateHolding))
	}
	h.setConfig(enabledConfig)
	// The fixture has no selector, so it is replaced: absent for a moment.
	h.waitStored("the DaemonSet applied once a valid config arrives", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	h.eventually("the holding series to clear", func() bool { return state(metrics.StateHolding) == 0 })
}

// Issue 33, defect 1: insights-config disables the runtime extractor while
// someone else's finalizer holds the DaemonSet; it enables it again during
// the hold. The apply finds the object terminating and cannot write it; when
// the finalizer goes, the deletion was the controller's own, expected, yet
// the level wants a DaemonSet: one is created at once, not at the resync 10
// minutes later. While held, Progressing says the DaemonSet is being deleted
// and names the finalizer, in the enabled states too.
func TestFinalizerHeldDeleteThenEnableCreatesAnew(t *testing.T) {
	const holder = "example.com/hold"
	var held atomic.Bool
	h := startWith(t, func(h *harness) {
		// The API server marks a DaemonSet with finalizers deleted instead of
		// removing it.
		h.api.Client.PrependReactor("delete", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			if !held.Load() {
				return false, nil, nil
			}
			ds := h.stored().DeepCopy()
			now := metav1.Now()
			ds.DeletionTimestamp = &now
			marked, err := h.api.Update(ds)
			return true, marked, err
		})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	ds := h.stored().DeepCopy()
	ds.Finalizers = []string{holder}
	if _, err := h.api.Update(ds); err != nil {
		t.Fatal(err)
	}
	held.Store(true)
	h.setConfig(disabledConfig)
	h.waitStored("the DaemonSet marked deleted", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.DeletionTimestamp != nil })
	h.setConfig(enabledConfig)
	var prog configv1.ClusterOperatorStatusCondition
	h.eventually("Progressing naming the finalizer in an enabled state", func() bool {
		s := h.ctrl.Status()
		prog = status.Conditions(s)[1]
		return s.State.Enabled() && strings.Contains(prog.Message, holder)
	})
	t.Logf("while held, enabled: Progressing=%s [%s] %q", prog.Status, prog.Reason, prog.Message)
	old := h.stored()
	held.Store(false)
	if err := h.api.Client.Tracker().Delete(fakeapi.DaemonSets, old.Namespace, old.Name); err != nil { // the finalizer is removed
		t.Fatal(err)
	}
	h.waitStored("a DaemonSet created anew", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
}

// Issue 33, defect 6: a re-list served by a lagging watch cache right after
// the controller's create shows no DaemonSet. The list predates the create,
// so it tells nothing about it: no drift counted, no second create.
func TestStaleRelistAfterOwnCreateIsNoDrift(t *testing.T) {
	s := newScriptedSim(t, true) // the controller created the DaemonSet; its event is in flight
	if s.stored() == nil || len(s.inFlight) == 0 {
		t.Fatalf("no create in flight after the start (stored %v)", s.stored() != nil)
	}
	writes := s.controllerWrites
	s.ri.reportAbsent("") // what relisted reports of a list from before the create
	s.runToQuiet()
	if n := s.driftCounts()[DriftDeleted]; n != 0 {
		t.Errorf("a stale re-list after the controller's own create counted %v deletion(s) as drift", n)
	}
	if n := s.controllerWrites - writes; n != 0 {
		t.Errorf("%d controller writes after the create, want none", n)
	}
	s.report()
}
