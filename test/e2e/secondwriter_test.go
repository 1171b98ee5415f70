package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// secondWriter behaves like the Insights Operator's status controller, the
// ClusterOperator's owner: each update reads the ClusterOperator, rebuilds the
// whole conditions list from what it read and writes it with UpdateStatus,
// retried on conflict. It knows nothing of our conditions.
type secondWriter struct {
	client configclient.Interface

	mu       sync.Mutex
	attempts []int   // per update, how many tries it took
	failed   []error // updates that did not land within their retries
}

func (w *secondWriter) update(ctx context.Context) {
	tries := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tries++
		co, err := w.client.ConfigV1().ClusterOperators().Get(ctx, clusterOperator, metav1.GetOptions{})
		if err != nil {
			return err
		}
		co.Status.Conditions = hostConditions(co.Status.Conditions, ownHostConditions(), metav1.Now())
		// The host's status extension, its last report time: every update is
		// a real write, which the other writer's watch sees.
		co.Status.Extension.Raw = []byte(fmt.Sprintf(`{"lastReportTime":%q}`, time.Now().UTC().Format(time.RFC3339Nano)))
		_, err = w.client.ConfigV1().ClusterOperators().UpdateStatus(ctx, co, metav1.UpdateOptions{})
		return err
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		w.failed = append(w.failed, err)
		return
	}
	w.attempts = append(w.attempts, tries)
}

// run updates every period for d, then closes the returned channel. The
// update under way when d ends completes: its requests are not bound by d.
func (w *secondWriter) run(ctx context.Context, period, d time.Duration) <-chan struct{} {
	return every(ctx, period, d, func(int) { w.update(ctx) })
}

// every calls f(0) now and f(i) every period after, on a goroutine of its
// own, for d (or until ctx is done), then closes the returned channel. A
// call under way when d ends completes, as a real writer's request would.
func every(ctx context.Context, period, d time.Duration, f func(i int)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		end := time.NewTimer(d)
		defer end.Stop()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := 0; ; i++ {
			f(i)
			select {
			case <-ctx.Done():
				return
			case <-end.C:
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// summary returns the landed updates, the conflicts retried and the most tries
// one update took.
func (w *secondWriter) summary() (updates, conflicts, maxTries int, failed []error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.attempts {
		conflicts += n - 1
		maxTries = max(maxTries, n)
	}
	return len(w.attempts), conflicts, maxTries, w.failed
}

// step is one change during the second writer's run: a drift the controller
// repairs, or a config change it follows.
type step struct {
	what        string
	began, done time.Time
	// allowed are the reasons our conditions may show while the step runs
	// (besides AsExpected).
	allowed []string
}

// landed is how many of the second writer's updates have landed so far.
func (w *secondWriter) landed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.attempts)
}

// TestSecondStatusWriterAndDriftRepairs runs the binary (which writes its three
// conditions with server-side apply) next to a second writer that rewrites the
// whole conditions list every 200 ms for 30 s, as the Insights Operator's status
// controller does. Meanwhile drift is repaired three times (the DaemonSet
// deleted, its image changed, deleted again), then insights-config disables
// and re-enables the extractor, so that the controller also writes status
// while the other writer runs: a repair converges within StatusMaxDelay here
// and writes none. Every one of the second writer's updates must land within
// its conflict retries; our conditions must be in every version of the
// ClusterOperator and never take a wrong value or change outside a step; the
// host's conditions must never disappear or change; and the controller
// writes status at most once per step (counted in the audit log).
func TestSecondStatusWriterAndDriftRepairs(t *testing.T) {
	const (
		writerPeriod = 200 * time.Millisecond
		writerRun    = 30 * time.Second
		// pace spreads the steps over the writer's run: the next one starts
		// once the writer has landed this many more updates (5 s worth).
		pace = int(5 * time.Second / writerPeriod)
		// settle bounds when the status write of a step that has converged
		// can still come: a rollout state waits up to StatusMaxDelay, a
		// settled one StatusSettle.
		settle = runtimeextractor.StatusMaxDelay + runtimeextractor.StatusSettle + time.Second
	)
	e := newEnv(t)
	e.restoreClusterOperatorAtEnd()
	kubeconfig, user := e.controllerAccountKubeconfig()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	e.waitRolledOut()
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, status.ReasonAsExpected)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, status.ReasonAsExpected)

	writer := &secondWriter{client: e.configClientAs("e2e-second-status-writer")}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	writer.update(ctx) // the host's conditions exist from the first recorded version on
	requests := e.requestLog()
	record := e.recordClusterOperator(ctx)
	start := time.Now()
	writerDone := writer.run(ctx, writerPeriod, writerRun)

	// Each drift returns how to tell it was repaired.
	repairing := []string{status.ReasonRestoring}
	steps := []struct {
		what    string
		allowed []string
		run     func()
	}{
		{"deleted DaemonSet repaired", repairing, func() { e.waitRepaired(c, e.deleteDaemonSetDrift()) }},
		{"changed image repaired", repairing, func() { e.waitRepaired(c, e.changeImageDrift()) }},
		// This deletion undoes the repair of the first (deletions name no
		// one: one writer), so the repair gate waits for 2 s of quiet, and
		// status may show the DaemonSet absent meanwhile.
		{"deleted DaemonSet repaired", append(slices.Clone(repairing), status.ReasonRollingOut), func() { e.waitRepaired(c, e.deleteDaemonSetDrift()) }},
		{"disabled by insights-config", []string{status.ReasonDeleting, status.ReasonDisabled}, func() {
			e.setConfig("dataReporting:\n  disableRuntimeExtractor: true\n")
			e.waitDaemonSet("the DaemonSet gone", func(ds *appsv1.DaemonSet) bool { return ds == nil })
			e.waitState(c, "Disabled")
			e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)
		}},
		{"re-enabled by insights-config", []string{status.ReasonDisabled, status.ReasonRollingOut}, func() {
			e.setConfig("dataReporting:\n  disableRuntimeExtractor: false\n")
			e.waitRolledOut()
			e.waitState(c, "Running")
			e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
		}},
	}
	var done []step
	for i, s := range steps {
		e.eventually(fmt.Sprintf("%d second-writer updates before step %d", (i+1)*pace, i+1), func(context.Context) (bool, error) {
			return writer.landed() >= (i+1)*pace, nil
		})
		st := step{what: s.what, allowed: s.allowed, began: time.Now()}
		s.run()
		st.done = time.Now()
		done = append(done, st)
	}
	stepsEnded := time.Since(start)
	<-writerDone
	// A window of absence: the last step's status write, if any, comes
	// within settle of its convergence.
	if wait := time.Until(done[len(done)-1].done.Add(settle)); wait > 0 {
		time.Sleep(wait)
	}
	end := time.Now()
	stop()
	versions, gaps := record.result()
	requests.flush()

	// 1. Every update of the second writer landed.
	updates, conflicts, maxTries, failed := writer.summary()
	t.Logf("second writer: %d updates in %s, %d conflicts retried, at most %d tries for one update (retry.DefaultRetry allows %d)",
		updates, writerRun, conflicts, maxTries, retry.DefaultRetry.Steps)
	for _, err := range failed {
		t.Errorf("a second-writer update did not land within its retries: %v", err)
	}
	if updates < len(steps)*pace {
		t.Errorf("only %d second-writer updates in %s: the writer did not run as meant", updates, writerRun)
	}

	// 2. Our status writes: at most one per step.
	var ours []time.Time
	for _, ev := range requests.read {
		if ev.User != user || ev.Resource != "clusteroperators" || !ev.IsWrite() || ev.Received.Before(start) || !ev.Received.Before(end) {
			continue
		}
		if ev.Verb != "patch" || ev.Subresource != "status" {
			t.Errorf("the controller wrote the ClusterOperator other than by a status patch: %s %s/%s (%d)", ev.Verb, ev.Resource, ev.Subresource, ev.Code)
		}
		ours = append(ours, ev.Received)
	}
	for i, st := range done {
		until := end
		if i+1 < len(done) {
			until = done[i+1].began
		}
		n := 0
		for _, at := range ours {
			if !at.Before(st.began) && at.Before(until) {
				n++
			}
		}
		t.Logf("step %d (%s) at +%s: converged in %s, %d status write(s)", i+1, st.what,
			st.began.Sub(start).Round(100*time.Millisecond), st.done.Sub(st.began).Round(10*time.Millisecond), n)
		if n > 1 {
			why := ""
			if took := st.done.Sub(st.began); took > runtimeextractor.StatusMaxDelay {
				// By design a change still in progress after StatusMaxDelay is
				// written (Restoring), and its end again: the machine was slow.
				why = fmt.Sprintf(" (it took %s, longer than StatusMaxDelay %s)", took.Round(10*time.Millisecond), runtimeextractor.StatusMaxDelay)
			}
			t.Errorf("step %d (%s): %d status writes, want at most one%s", i+1, st.what, n, why)
		}
	}
	t.Logf("status writes by the controller in the %s window: %d for %d steps; steps done %s into the writer's run",
		end.Sub(start).Round(100*time.Millisecond), len(ours), len(done), stepsEnded.Round(100*time.Millisecond))
	if len(ours) == 0 {
		t.Errorf("the controller wrote no status while the second writer ran: the two writers never met")
	}

	// 3. Neither side flaps: checked on every version of the ClusterOperator.
	if gaps > 0 {
		t.Errorf("the ClusterOperator watch broke %d time(s): versions may be missing", gaps)
	}
	// during returns the reasons the steps running at "at" allow (windows may
	// overlap), and whether any runs.
	during := func(at time.Time) (allowed []string, inStep bool) {
		for _, st := range done {
			if !at.Before(st.began) && at.Before(st.done.Add(settle)) {
				allowed, inStep = append(allowed, st.allowed...), true
			}
		}
		return allowed, inStep
	}
	host := ownHostConditions()
	changes := map[configv1.ClusterStatusConditionType]int{}
	var last map[configv1.ClusterStatusConditionType]configv1.ClusterOperatorStatusCondition
	for i, v := range versions {
		for _, h := range host {
			if got, ok := v.conditions[h.Type]; !ok || got.Status != h.Status || got.Reason != h.Reason {
				t.Errorf("version %d (rv %s): the host's %s is %s, want %s %s", i, v.rv, h.Type, describeCondition(got, ok), h.Status, h.Reason)
			}
		}
		allowed, inStep := during(v.at)
		for _, typ := range status.ConditionTypes {
			got, ok := v.conditions[typ]
			if !ok {
				t.Errorf("version %d (rv %s): %s is missing", i, v.rv, typ)
				continue
			}
			if problem := wrongCondition(got, allowed); problem != "" {
				t.Errorf("version %d (rv %s) at +%s: %s", i, v.rv, v.at.Sub(start).Round(100*time.Millisecond), problem)
			}
			if prev, had := last[typ]; had && (prev.Status != got.Status || prev.Reason != got.Reason) {
				changes[typ]++
				if !inStep {
					t.Errorf("version %d (rv %s): %s changed %s %s -> %s %s outside any step", i, v.rv, typ, prev.Status, prev.Reason, got.Status, got.Reason)
				}
			}
		}
		last = v.conditions
	}
	t.Logf("%d versions of the ClusterOperator recorded; changes of our conditions: %v", len(versions), changes)
	final := versions[len(versions)-1].conditions
	for _, typ := range status.ConditionTypes {
		if c := final[typ]; c.Reason != status.ReasonAsExpected {
			t.Errorf("in the end %s is %s %s, want %s", typ, c.Status, c.Reason, status.ReasonAsExpected)
		}
	}
}

// waitRepaired waits until a drift is repaired, the DaemonSet rolled out and
// the controller back in Running.
func (e *env) waitRepaired(c *controller, repaired func(*appsv1.DaemonSet) bool) {
	e.t.Helper()
	e.waitDaemonSet("the drift repaired and rolled out", func(ds *appsv1.DaemonSet) bool { return e.rolledOut(ds) && repaired(ds) })
	e.waitState(c, "Running")
}

// wrongCondition says what is wrong with one of our conditions ("" when
// nothing): the controller never fails here, so Degraded stays False;
// Available is True; Progressing is False AsExpected, or True while a step
// allows it. The reason is AsExpected or one that the step allows.
func wrongCondition(c configv1.ClusterOperatorStatusCondition, allowed []string) string {
	reasonOK := c.Reason == status.ReasonAsExpected || slices.Contains(allowed, c.Reason)
	ok := false
	switch c.Type {
	case status.ConditionAvailable:
		// A repair or first rollout may show no pod available for a moment.
		ok = reasonOK && (c.Status == configv1.ConditionTrue || c.Reason != status.ReasonAsExpected)
	case status.ConditionProgressing:
		ok = reasonOK && (c.Status == configv1.ConditionFalse || c.Reason != status.ReasonAsExpected)
	case status.ConditionDegraded:
		ok = c.Status == configv1.ConditionFalse && c.Reason == status.ReasonAsExpected
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("%s is %s %s (%q)", c.Type, c.Status, c.Reason, c.Message)
}

func describeCondition(c configv1.ClusterOperatorStatusCondition, ok bool) string {
	if !ok {
		return "missing"
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s", c.Status, c.Reason))
}
