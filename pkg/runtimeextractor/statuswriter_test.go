package runtimeextractor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// TestStatusWriterRetriesAFailedWrite: the loop only offers snapshots; a failed
// write is retried by the writer on its own, without another offer.
func TestStatusWriterRetriesAFailedWrite(t *testing.T) {
	client := configfake.NewClientset(&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights"}})
	var failures atomic.Int32
	client.PrependReactor("update", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failures.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		return false, nil, nil
	})
	w := newStatusWriter(status.NewReporter(client.ConfigV1(), "insights"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	defer func() { cancel(); <-done }()

	w.offer(status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Desired: 3})
	w.offer(status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3})
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 3*statusRetry, true, func(ctx context.Context) (bool, error) {
		co, err := client.ConfigV1().ClusterOperators().Get(ctx, "insights", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range co.Status.Conditions {
			if c.Type == status.ConditionAvailable && c.Reason == status.ReasonAsExpected {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the latest snapshot was never written: %v", err)
	}
	if failures.Load() < 2 {
		t.Fatalf("got %d update attempts, want a failure and a retry", failures.Load())
	}
}

// Defect 2: a failed write armed the retry with its snapshot; a later
// successful write cleared neither, so the retry wrote the old failed snapshot
// over the newer good one.
func TestStatusWriterNeverReplaysAnOlderSnapshot(t *testing.T) {
	client := configfake.NewClientset(&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "insights"}})
	var calls atomic.Int32
	client.PrependReactor("update", "clusteroperators", func(clienttesting.Action) (bool, runtime.Object, error) {
		if calls.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("injected")
		}
		return false, nil, nil
	})
	fakeClock := clocktesting.NewFakeClock(time.Now())
	w := newStatusWriter(status.NewReporter(client.ConfigV1(), "insights"))
	w.clock = fakeClock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx) }()
	defer func() { cancel(); <-done }()

	degraded := status.Snapshot{State: fsm.StateDeploying, Version: "4.22.0", Failures: 3, LastError: errors.New("boom")}
	running := status.Snapshot{State: fsm.StateRunning, Version: "4.22.0", Desired: 3, Updated: 3, Available: 3}
	available := func(ctx context.Context) (bool, error) {
		co, err := client.ConfigV1().ClusterOperators().Get(ctx, "insights", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range co.Status.Conditions {
			if c.Type == status.ConditionAvailable {
				return c.Reason == status.ReasonAsExpected, nil
			}
		}
		return false, nil
	}
	w.offer(degraded) // fails: the retry timer is armed
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return fakeClock.HasWaiters(), nil
	}); err != nil {
		t.Fatal("the failed write armed no retry")
	}
	w.offer(running)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, available); err != nil {
		t.Fatalf("the newer snapshot was not written: %v", err)
	}
	fakeClock.Step(statusRetry)
	// Give a (wrong) replay every chance to land before checking it did not.
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := available(ctx)
		return !ok, err
	})
	if err == nil {
		t.Fatalf("the retry wrote the older failed snapshot over the newer one")
	}
}
