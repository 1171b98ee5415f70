package runtimeextractor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	"github.com/openshift/library-go/pkg/config/clusteroperator/v1helpers"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

var (
	swRunning  = status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3}
	swDegraded = status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Failures: 3, LastError: errors.New("boom")}
)

// writerFixture runs a statusWriter on a fake clientset and a fake clock.
type writerFixture struct {
	t       *testing.T
	client  *configfake.Clientset
	clock   *clocktesting.FakeClock
	w       *statusWriter
	applies atomic.Int32 // apply attempts, failed or not
}

// newWriterFixture starts a writer; failFirst apply attempts fail.
func newWriterFixture(t *testing.T, failFirst int32) *writerFixture {
	f := &writerFixture{t: t, clock: clocktesting.NewFakeClock(time.Now())}
	f.client = configfake.NewClientset(&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights"}})
	f.client.PrependReactor("patch", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		if f.applies.Add(1) <= failFirst {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		return false, nil, nil
	})
	f.w = newStatusWriter(status.NewReporter(f.client.ConfigV1(), "insights"))
	f.w.clock = f.clock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.w.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// offer hands s over and waits until the writer has taken it in.
func (f *writerFixture) offer(s status.Snapshot) {
	f.t.Helper()
	f.w.offer(s)
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
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
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
	f.step(statusRetry - time.Millisecond)
	f.never("retried before statusRetry", func() bool { return f.applies.Load() > 1 })
	f.step(time.Millisecond)
	f.eventually("the retry", func() bool { return f.reason(status.ConditionDegraded) == status.ReasonApplyFailed })
}

// A snapshot is written once it stayed unchanged for StatusSettle, not before.
func TestStatusWriterWaitsForTheSnapshotToSettle(t *testing.T) {
	f := newWriterFixture(t, 0)
	f.offer(swRunning)
	f.step(StatusSettle - time.Millisecond)
	f.never("written before it settled", func() bool { return f.applies.Load() > 0 })
	f.step(time.Millisecond)
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
	running := status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3}
	p := &pending{snapshot: running, conditions: status.Conditions(running), since: t0.Add(time.Second), changedAt: t0.Add(time.Second)}
	if due := p.due(written, t0); due.Before(t0.Add(StatusMaxDelay)) {
		t.Fatalf("the end of a rollout is due %s after the last write, want at least %s", due.Sub(t0), StatusMaxDelay)
	}
	if due := p.due(written, time.Time{}); !due.Equal(t0.Add(time.Second + StatusSettle)) {
		t.Fatalf("with no write before, a settled snapshot is due %s after its change, want %s", due.Sub(t0.Add(time.Second)), StatusSettle)
	}
	failing := status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Failures: 1, LastError: errors.New("boom")}
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
