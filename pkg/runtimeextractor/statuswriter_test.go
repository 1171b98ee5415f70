package runtimeextractor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	configv1informers "github.com/openshift/client-go/config/informers/externalversions/config/v1"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

var (
	swRunning  = status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3, Present: true, AppliedVersion: "4.22.0", RolledOut: true}
	swDegraded = status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Failures: 3, LastError: errors.New("boom"), FailurePersists: true}
)

// writerFixture runs a statusWriter on a fake clientset and a fake clock.
type writerFixture struct {
	t       *testing.T
	client  *configfake.Clientset
	clock   *clocktesting.FakeClock
	w       *statusWriter
	applies atomic.Int32 // apply attempts, failed or not
	// handled gets a value after each call of the Reporter's event handler
	// (observing fixtures only).
	handled chan struct{}
	logs    syncList[string] // what the writer and its Reporter logged through ctx
}

// newWriterFixture starts a writer; failFirst apply attempts fail.
func newWriterFixture(t *testing.T, failFirst int32) *writerFixture {
	return startWriterFixture(t, failFirst, false, &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights"}})
}

// newObservingWriterFixture starts a writer whose Reporter follows the
// ClusterOperator through a synced informer, as the binary wires it, on a
// cluster where the ClusterOperator does not exist yet.
func newObservingWriterFixture(t *testing.T) *writerFixture {
	return startWriterFixture(t, 0, true)
}

func startWriterFixture(t *testing.T, failFirst int32, observe bool, objects ...runtime.Object) *writerFixture {
	f := &writerFixture{t: t, clock: clocktesting.NewFakeClock(time.Now())}
	f.client = configfake.NewClientset(objects...)
	f.client.PrependReactor("patch", "clusteroperators", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if f.applies.Add(1) <= failFirst {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		// As the API server: the status of an absent object is not found
		// (the fake's apply would create it).
		if _, err := f.client.Tracker().Get(a.GetResource(), "", "insights"); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	reporter := status.NewReporter(f.client.ConfigV1(), "insights")
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		f.logs.add(prefix + args)
	}, funcr.Options{})))
	if observe {
		factory := configinformers.NewSharedInformerFactory(f.client, 0)
		f.handled = make(chan struct{}, 16)
		if err := reporter.Observe(signalling{factory.Config().V1().ClusterOperators(), f.handled}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(factory.Shutdown) // after cancel: cleanups run last-in first
		watching := fakeapi.WatchStarted(f.client, "clusteroperators")
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		f.eventually("the watch to start", fakeapi.Closed(watching))
	}
	f.w = &statusWriter{reporter: reporter, clock: f.clock, wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() { defer close(done); f.w.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if observe {
		f.changeSeen(len(objects)) // the initial list's adds
	}
	return f
}

// offer hands s over and waits until the writer has taken it in.
func (f *writerFixture) offer(s status.Snapshot) {
	f.t.Helper()
	f.w.offer(s, status.Conditions(s))
	f.eventually("the writer to take the snapshot", func() bool {
		f.w.mu.Lock()
		defer f.w.mu.Unlock()
		return f.w.latest == nil
	})
}

// step moves the fake clock once the writer waits on it.
func (f *writerFixture) step(d time.Duration) {
	f.t.Helper()
	f.eventually("the writer to wait on its clock", f.clock.HasWaiters)
	f.clock.Step(d)
}

func (f *writerFixture) eventually(what string, ok func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, testwait.Patience, true, func(context.Context) (bool, error) {
		return ok(), nil
	}); err != nil {
		f.t.Fatalf("timed out waiting for %s", what)
	}
}

// never asserts that ok stays false for a while (a write that must not come).
func (f *writerFixture) never(what string, ok func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		return ok(), nil
	}); err == nil {
		f.t.Fatal(what)
	}
}

// noApplyUntil lets d pass on the writer's clock, checking just before d
// that no more than applied writes were attempted.
func (f *writerFixture) noApplyUntil(d time.Duration, applied int32, failure string) {
	f.t.Helper()
	f.step(d - time.Millisecond)
	f.never(failure, func() bool { return f.applies.Load() > applied })
	f.step(time.Millisecond)
}

// changeSeen waits until the Reporter's handler has run for n watch events
// and the writer has taken the Changed signal, so that what the test does
// next reaches the writer after it.
func (f *writerFixture) changeSeen(n int) {
	f.t.Helper()
	for range n {
		select {
		case <-f.handled:
		case <-time.After(testwait.Patience):
			f.t.Fatal("timed out waiting for the Reporter to see the ClusterOperator change")
		}
	}
	f.eventually("the writer to take the Changed signal", func() bool { return len(f.w.reporter.Changed()) == 0 })
}

// logged reports whether a line containing text was logged.
func (f *writerFixture) logged(text string) bool {
	return f.logs.any(func(l string) bool { return strings.Contains(l, text) })
}

// foundAbsent waits until the writer has tried to write and found no
// ClusterOperator (the Reporter logs that once per absence).
func (f *writerFixture) foundAbsent() {
	f.t.Helper()
	f.eventually("the ClusterOperator to be found absent", func() bool { return f.logged("ClusterOperator not found") })
}

// createClusterOperator creates it with resourceVersion rv, which the fake
// does not set as a server does.
func (f *writerFixture) createClusterOperator(rv string) {
	f.t.Helper()
	_, err := f.client.ConfigV1().ClusterOperators().Create(context.Background(),
		&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights", ResourceVersion: rv}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

// shows reports whether the ClusterOperator carries the conditions of s.
func (f *writerFixture) shows(s status.Snapshot) bool {
	co, err := f.client.ConfigV1().ClusterOperators().Get(context.Background(), "insights", metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, want := range status.Conditions(s) {
		got := v1helpers.FindStatusCondition(co.Status.Conditions, want.Type)
		if got == nil || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message {
			return false
		}
	}
	return true
}

func (f *writerFixture) reason(t configv1.ClusterStatusConditionType) string {
	co, err := f.client.ConfigV1().ClusterOperators().Get(context.Background(), "insights", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if c := v1helpers.FindStatusCondition(co.Status.Conditions, t); c != nil {
		return c.Reason
	}
	return ""
}

// A failure is written at once; a failed write is retried by the writer on
// its own after statusRetry, without another offer.
func TestStatusWriterWritesAFailureAtOnceAndRetries(t *testing.T) {
	f := newWriterFixture(t, 1)
	f.offer(swDegraded)
	f.eventually("the failure to be written at once", func() bool { return f.applies.Load() == 1 })
	f.noApplyUntil(statusRetry, 1, "retried before statusRetry")
	f.eventually("the retry", func() bool { return f.reason(status.ConditionDegraded) == status.ReasonApplyFailed })
}

// A snapshot is written once it stayed unchanged for StatusSettle, not before.
func TestStatusWriterWaitsForTheSnapshotToSettle(t *testing.T) {
	f := newWriterFixture(t, 0)
	f.offer(swRunning)
	f.noApplyUntil(StatusSettle, 0, "written before it settled")
	f.eventually("the settled snapshot", func() bool { return f.reason(status.ConditionAvailable) == status.ReasonAsExpected })
}

// Running -> Drifted -> Running within StatusMaxDelay writes nothing: the
// repair's snapshots are a rollout in progress, and the end equals what is
// written.
func TestStatusWriterQuickRepairWritesNothing(t *testing.T) {
	f := newWriterFixture(t, 0)
	f.offer(swRunning)
	f.step(StatusSettle)
	f.eventually("the first write", func() bool { return f.applies.Load() == 1 })

	for i, s := range []status.Snapshot{
		{State: fsm.StateDrifted, Version: "4.22.0"},
		{State: fsm.StateDrifted, Version: "4.22.0", Desired: 3},
		{State: fsm.StateDrifted, Version: "4.22.0", Desired: 3, Updated: 3, Available: 1},
	} {
		f.offer(s)
		f.step(time.Second)
		if n := f.applies.Load(); n != 1 {
			t.Fatalf("snapshot %d of the repair was written (%d applies)", i, n)
		}
	}
	f.offer(swRunning)
	f.clock.Step(2 * StatusMaxDelay)
	f.never("the repair wrote status", func() bool { return f.applies.Load() > 1 })
}

// A long rollout whose counts change every 200 ms writes at most once per
// StatusMaxDelay.
func TestStatusWriterLongRolloutIsBoundedByTime(t *testing.T) {
	f := newWriterFixture(t, 0)
	const tick = 200 * time.Millisecond
	const length = 30 * time.Second
	for i := range int32(length / tick) {
		f.offer(status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Desired: 1000, Updated: i, Available: i})
		f.clock.Step(tick) // the writer may be idle right after a write
	}
	f.eventually("a write during the rollout", func() bool { return f.applies.Load() > 0 })
	if n, limit := f.applies.Load(), int32(length/StatusMaxDelay)+1; n > limit {
		t.Fatalf("%d writes in a %s rollout, want at most %d", n, length, limit)
	}
}

// Writes are StatusMaxDelay apart, also when the rollout ends (a settled
// Running) right after a write; a new failure is not held back.
func TestStatusWritesAreSpacedButFailuresAreNot(t *testing.T) {
	t0 := time.Now()
	written := status.Conditions(status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Desired: 3, Updated: 1, Available: 1})
	running := status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3, Present: true, AppliedVersion: "4.22.0", RolledOut: true}
	p := &pending{snapshot: running, conditions: status.Conditions(running), since: t0.Add(time.Second), changedAt: t0.Add(time.Second)}
	if due := p.due(written, t0); due.Before(t0.Add(StatusMaxDelay)) {
		t.Fatalf("the end of a rollout is due %s after the last write, want at least %s", due.Sub(t0), StatusMaxDelay)
	}
	if due := p.due(written, time.Time{}); !due.Equal(t0.Add(time.Second + StatusSettle)) {
		t.Fatalf("with no write before, a settled snapshot is due %s after its change, want %s", due.Sub(t0.Add(time.Second)), StatusSettle)
	}
	failing := status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Failures: 1, LastError: errors.New("boom"), FailurePersists: true}
	f := &pending{snapshot: failing, conditions: status.Conditions(failing), since: t0.Add(time.Second), changedAt: t0.Add(time.Second)}
	if due := f.due(written, t0); !due.Equal(t0.Add(time.Second)) {
		t.Fatalf("a new failure is due %s after it happened, want at once", due.Sub(t0.Add(time.Second)))
	}
}

// Defect 2: a failed write armed the retry with its snapshot; a later
// successful write must not let the retry write the older failed snapshot
// over the newer one.
func TestStatusWriterNeverReplaysAnOlderSnapshot(t *testing.T) {
	f := newWriterFixture(t, 1)
	f.offer(swDegraded) // fails: the retry timer is armed
	f.eventually("the failed write", func() bool { return f.applies.Load() == 1 })
	f.offer(swRunning)
	f.step(statusRetry)
	f.eventually("the newer snapshot", func() bool { return f.reason(status.ConditionAvailable) == status.ReasonAsExpected })
	f.clock.Step(2 * statusRetry)
	f.never("the older failed snapshot was written over the newer one", func() bool {
		return f.reason(status.ConditionDegraded) == status.ReasonApplyFailed
	})
}

// The Reporter's informer, with a signal after each call of the handlers the
// Reporter adds.
type signalling struct {
	configv1informers.ClusterOperatorInformer
	handled chan<- struct{}
}

func (s signalling) Informer() cache.SharedIndexInformer {
	return signallingInformer{s.ClusterOperatorInformer.Informer(), s.handled}
}

type signallingInformer struct {
	cache.SharedIndexInformer
	handled chan<- struct{}
}

func (i signallingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	signal := func() {
		select {
		case i.handled <- struct{}{}:
		default:
		}
	}
	return i.SharedIndexInformer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { h.OnAdd(obj, initial); signal() },
		UpdateFunc: func(old, obj any) { h.OnUpdate(old, obj); signal() },
		DeleteFunc: func(obj any) { h.OnDelete(obj); signal() },
	})
}

var swUpgrading = status.Snapshot{State: fsm.StateUpgrading, Version: "4.22.1", Desired: 3, Updated: 1, Available: 3}

// Defect 6: a ClusterOperator that appears after the controller started gets
// the latest status as soon as the informer shows it: no request while it is
// absent, one write when it appears.
func TestStatusWriterWritesToAClusterOperatorThatAppearsLate(t *testing.T) {
	f := newObservingWriterFixture(t)
	f.offer(swRunning)
	f.step(StatusSettle)
	f.foundAbsent()
	f.offer(swDegraded) // due at once
	f.never("a request while the ClusterOperator is absent", func() bool { return f.applies.Load() > 0 })

	f.createClusterOperator("1")
	f.eventually("the latest status on the ClusterOperator that appeared", func() bool { return f.shows(swDegraded) })
	f.never("more than one write for its appearance", func() bool { return f.applies.Load() > 1 })
}

// Defect 6: a status found absent is not written. The ClusterOperator appears
// while a change is pending, and the change is undone before it is written:
// what was found absent is still to be written.
func TestStatusWriterWritesToAClusterOperatorThatAppearsDuringAChange(t *testing.T) {
	f := newObservingWriterFixture(t)
	f.offer(swRunning)
	f.step(StatusSettle)
	f.foundAbsent()
	f.offer(swUpgrading)
	f.createClusterOperator("1")
	f.changeSeen(1)
	f.offer(swRunning)
	f.step(StatusSettle)
	f.eventually("the status on the ClusterOperator that appeared", func() bool { return f.shows(swRunning) })
	if n := f.applies.Load(); n != 1 {
		t.Fatalf("%d applies, want 1", n)
	}
}

// A ClusterOperator deleted and created again while a change is pending, and
// the change undone before it is written: the written status goes to the new
// object.
func TestStatusWriterRewritesARecreatedClusterOperator(t *testing.T) {
	f := startWriterFixture(t, 0, true, &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights", ResourceVersion: "1"}})
	f.offer(swRunning)
	f.step(StatusSettle)
	f.eventually("the first write", func() bool { return f.shows(swRunning) })
	f.changeSeen(1) // the informer shows our write
	f.offer(swUpgrading)
	if err := f.client.ConfigV1().ClusterOperators().Delete(context.Background(), "insights", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.createClusterOperator("2")
	f.changeSeen(2)
	f.offer(swRunning)
	f.eventually("the status on the new ClusterOperator", func() bool { return f.shows(swRunning) })
	if n := f.applies.Load(); n != 2 {
		t.Fatalf("%d applies, want 2", n)
	}
}

// The informer shows the ClusterOperator, but a write gets NotFound (the API
// server, just restarted, does not serve the custom resource yet). No
// change of the ClusterOperator will come to say it is back: the write is
// retried after statusRetry. One CI run's status stayed unwritten for good
// after an API server outage.
func TestStatusWriterRetriesAWriteThatFoundNoClusterOperator(t *testing.T) {
	f := startWriterFixture(t, 0, true, &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights"}})
	var notFound atomic.Bool
	notFound.Store(true)
	f.client.PrependReactor("patch", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		if notFound.CompareAndSwap(true, false) {
			f.applies.Add(1)
			return true, nil, apierrors.NewNotFound(configv1.Resource("clusteroperators"), "insights")
		}
		return false, nil, nil
	})
	f.offer(swRunning)
	f.step(StatusSettle)
	f.eventually("the write that found no ClusterOperator", func() bool { return f.applies.Load() == 1 })
	f.step(statusRetry)
	f.eventually("the retry", func() bool { return f.shows(swRunning) })
}
