package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// TestResyncRepairsWhatTheBackoffWouldDelay is the test of --resync, and the
// only end-to-end test that shortens it (to 5 s; every other test runs the
// default 10 minutes).
//
//  1. At rest, every resync re-asserts the level: the Apply count grows by one
//     per period, and the API server sees no write from the controller (its
//     requests are counted in kube-apiserver's audit log; it runs as the
//     shipped ServiceAccount, so they are told apart from the test's).
//  2. A change the controller saw but could not act on is repaired by the
//     resync. The controller may not update the DaemonSet; someone changes the
//     DaemonSet's image; the apply fails and is retried with a backoff that
//     grows with every failure. Then the permission comes back. The controller
//     cannot observe that (it does not watch RBAC), so only a timer can make it
//     apply again: the image must be restored before the retry the backoff
//     scheduled was due, which only the resync can do. (At the default
//     resync, the backoff's retry, at most 5 minutes away, does it.)
func TestResyncRepairsWhatTheBackoffWouldDelay(t *testing.T) {
	const (
		resync = 5 * time.Second
		// quiet is the window over which resyncs are counted: three or four.
		quiet = 3*resync + resync/2
		// longRetry: the permission comes back right after a retry was
		// scheduled at least this far ahead, so that the next resync comes
		// well before it.
		longRetry = 4 * resync
	)
	e := newEnv(t)
	role := e.installRBAC()
	ctx := context.Background()
	kubeconfig, _ := e.controllerKubeconfig()
	user := testcluster.ServiceAccountUser(ns, controllerAccount)
	c := e.startController(controllerOpts{kubeconfig: kubeconfig, args: []string{"--resync", resync.String()}})
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")

	// 1. At rest. An own write is awaited in the cache until an apply
	// consults it or resources.ExpectationTimeout passes, and that timeout
	// re-asserts once: the window opens after it, or it could hold a fifth
	// Apply that no resync made (as CI once saw).
	time.Sleep(resources.ExpectationTimeout)
	requests := e.requestLog()
	applies := func() float64 {
		return metricSum(c.metrics(), "runtime_extractor_actions_total", `action="Apply"`, `result="success"`)
	}
	before := e.daemonSet()
	from, a0 := time.Now(), applies()
	time.Sleep(quiet) // the quiet window itself
	a1, to := applies(), time.Now()
	requests.flush()
	writes := requests.writes(user, from, to)
	reads := requests.reads(user, "daemonsets", from, to)
	t.Logf("at rest, %s with --resync %s: %.0f applies, %d DaemonSet reads, writes: %s",
		to.Sub(from).Round(100*time.Millisecond), resync, a1-a0, reads, joinOrNone(writes))
	if n := a1 - a0; n < 3 || n > 4 {
		t.Errorf("%.0f applies in %s with --resync %s, want one per resync (3 or 4)", n, quiet, resync)
	}
	if len(writes) > 0 {
		t.Errorf("the controller wrote while nothing changed: %s", strings.Join(writes, ", "))
	}
	if after := e.daemonSet(); after == nil || after.UID != before.UID || after.Generation != before.Generation {
		t.Errorf("the DaemonSet was replaced or its spec written at rest")
	}

	// 2. A change the controller cannot act on until a timer fires.
	e.updateRole(withoutVerb(role, "update"))
	e.waitCan("update", false)
	var want string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := e.daemonSet().DeepCopy()
		want = ds.Spec.Template.Spec.Containers[0].Image
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
		_, err := e.kube.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	due, delay := c.waitRetryScheduled(longRetry, 2*time.Minute)
	e.updateRole(role)
	e.waitCan("update", true)
	lifted := time.Now()
	var restored time.Time
	e.waitDaemonSet("the image restored", func(cur *appsv1.DaemonSet) bool {
		if cur != nil && cur.Spec.Template.Spec.Containers[0].Image == want {
			restored = time.Now()
			return true
		}
		return false
	})
	t.Logf("a retry was scheduled in %s; the permission came back %s before it was due; the image was restored %s after that",
		delay, due.Sub(lifted).Round(100*time.Millisecond), restored.Sub(lifted).Round(100*time.Millisecond))
	if !restored.Before(due) {
		t.Errorf("the image was restored only %s after the permission came back, when the retry scheduled %s ahead was due: the resync did not repair it",
			restored.Sub(lifted).Round(100*time.Millisecond), delay)
	}
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}

// retryDelays returns the delay of every retry the controller scheduled, in
// log order ("retrying in 1.6s after 4 failure(s): ...").
func (c *controller) retryDelays() []time.Duration {
	var out []time.Duration
	for _, line := range strings.Split(readFile(c.Log), "\n") {
		_, rest, ok := strings.Cut(line, retryLine+" ")
		if !ok {
			continue
		}
		word, _, _ := strings.Cut(rest, " ")
		if d, err := time.ParseDuration(word); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// waitRetryScheduled waits until the controller schedules a retry at least min
// ahead. It returns the earliest time that retry can be due: it was scheduled
// after the last look at the log that did not show it.
func (c *controller) waitRetryScheduled(min, timeout time.Duration) (due time.Time, delay time.Duration) {
	c.t.Helper()
	seen := len(c.retryDelays())
	lastLook := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		look := time.Now()
		delays := c.retryDelays()
		defer func() { seen, lastLook = len(delays), look }()
		if len(delays) == seen {
			return false, nil
		}
		delay = delays[len(delays)-1]
		due = lastLook.Add(delay)
		return delay >= min, nil
	})
	if err != nil {
		c.t.Fatalf("the controller did not schedule a retry %s or more ahead within %s (delays so far: %v):\n%s", min, timeout, c.retryDelays(), tail(c.Log, 30))
	}
	return due, delay
}
