package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// TestFirstCorrectionAfterAPIServerOutage measures how soon after an API
// server outage the controller corrects drift again. The controller runs
// rolled out; kube-apiserver stops for 15 s, six times back to back (so the
// reflector's backoff, which resets only after two quiet minutes, grows to
// its cap). Outages longer than the node monitor grace period would also
// make kube-controller-manager taint every kwok node and evict the pods, a
// recovery of the cluster's own that is not what this test measures. As soon
// as it is back, the test deletes the DaemonSet and times the
// controller's re-creation from the moment the API server was back. The
// issue's bounds: a median of at most 2 s; and every deletion corrected, here
// within 20 s.
//
// While the API server is down, the controller's watch is broken, and the
// informer's reconnection backs off (0.8 s doubling to 30 s, each wait up to
// twice that with jitter); behind the load balancer client-go even reports
// the lost watch as an empty one, without an error, and the watch it resumes
// after the restart ends at once with 410 Expired, after which the reflector
// re-lists only after that backoff. A controller that waits for its informer
// sees the deletion up to a minute late, and one whose cache never saw the
// DaemonSet it re-created just before the outage not at all. The controller bridges both with live reads
// and re-checks the level after every re-list.
//
// The controller reaches the API server through a TCP proxy that acts as a
// load balancer with a /readyz health check: the API server leaves the
// rotation before it stops and returns to it when /readyz answers, and that
// moment is "back". (Without the health check, clients would reach the
// restarting process seconds before it is ready, and "back" would be blurred.)
//
// The controller runs at its defaults, except that leader election is off, as
// in TestAPIServerOutage: outages back to back leave a leader a few seconds
// between them to renew its lease, and library-go ends a process that could
// not renew for the renew deadline (107 s by default; one run lost it after
// five 15 s outages). That is the intended behaviour, and a restart would hide
// what this test measures: how one process recovers.
//
// The first outage starts with the DaemonSet rolled out; each later one as
// soon as the controller has recreated it: its rollout waits for
// kube-controller-manager, kube-scheduler and kwok, which recover from each
// outage at their own pace (up to a minute), and waiting for it would triple
// the test's time without changing what is measured.
func TestFirstCorrectionAfterAPIServerOutage(t *testing.T) {
	// The outage bounds of issue 11, from the moment the API server is back
	// to the re-creation of the DaemonSet deleted then.
	const (
		// outageP50Bound is the target, on the median.
		outageP50Bound = 2 * time.Second
		// outageMaxBound bounds every sample: generous, so a loaded 2-core machine
		// does not fail it, yet below the reflector's 30 to 60 s backoff plus a
		// re-list, and the 10-minute resync, that a missed deletion waited for.
		outageMaxBound = 20 * time.Second
		// outageGiveUp is how long a late re-creation is still waited for, to tell
		// a slow correction (and how slow) from none.
		outageGiveUp = 3 * time.Minute
		// outageEarlySlack is how much earlier than the replay the
		// controller may repair: it saw the deletion through its own watch,
		// a few milliseconds apart from the test's.
		outageEarlySlack = time.Second
	)
	outages := []time.Duration{15 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second}
	e := newEnv(t)
	proxy := e.startCountingProxy()
	c := e.startController(controllerOpts{kubeconfig: proxy.kubeconfig(t), args: []string{"--disable-leader-election"}})
	e.waitRolledOut()
	e.waitState(c, "Running")
	old := e.daemonSet()

	// The deletions are one unnamed writer's, about 20 s apart: from the
	// second on, each undoes the controller's repair of the one before, so
	// the repair gate defers its repair (2 s of quiet, and the budget's
	// allowance once the fight has spent it). The bounds are on the
	// correction after what the gate allows: the test replays the gate's
	// rules (package core) on the deletion and re-creation times it
	// sees, so that it asserts the schedule on purpose.
	p := runtimeextractor.DefaultRepairPolicy()
	var gate core.Log
	var took []time.Duration
	for i, d := range outages {
		proxy.SetServing(false) // /readyz fails as the API server shuts down
		stoppedAt := e.stopAPIServer()
		time.Sleep(time.Until(stoppedAt.Add(d))) // the fault itself: a fixed outage
		if !c.alive() {
			t.Fatalf("controller %d exited during the outage:\n%s", c.pid(), tail(c.Log, 30))
		}
		e.startAPIServer() // returns when /readyz answers
		proxy.SetServing(true)
		back := time.Now()
		// The DaemonSet deleted, and the controller's new one seen, by a
		// watch opened before the deletion.
		var deleted, recreated time.Time
		var err error
		old, deleted, recreated, err = testcluster.DeleteAndAwaitRecreation(context.Background(), e.kube, ns, name, old.UID, outageGiveUp)
		if !deleted.IsZero() {
			// The test's own reconnection counts in the figure: say how much of it it was.
			t.Logf("deleted the DaemonSet %s after the API server was back", deleted.Sub(back).Round(time.Millisecond))
		}
		if err != nil {
			t.Fatal(err)
		}
		var dec core.Decision
		gate, dec = p.Changed(gate, nil, deleted)
		allowed := back
		if !dec.Repair && dec.At.After(allowed) {
			allowed = dec.At
		}
		gate = p.Repaired(gate, recreated)
		latency := recreated.Sub(allowed)
		took = append(took, latency)
		t.Logf("outage %d (%s): DaemonSet recreated %s after the API server was back, %s after the repair gate allowed it",
			i+1, d, recreated.Sub(back).Round(time.Millisecond), latency.Round(time.Millisecond))
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	p50, worst := pct(sorted, 0.50), sorted[len(sorted)-1].Round(time.Millisecond)
	t.Logf("first correction after the API server was back and the repair gate allowed it, over %d outages: p50 %s, max %s", len(took), p50, worst)
	if p50 > outageP50Bound {
		t.Errorf("median first correction %s after the API server was back and the gate allowed it, want at most %s (issue 11)", p50, outageP50Bound)
	}
	if early := sorted[0]; early < -outageEarlySlack {
		t.Errorf("a deletion was corrected %s before the repair gate allowed it: every repair waits for the gate, whatever else (a config re-list, a retry) wakes the controller: %v", -early.Round(time.Millisecond), took)
	}
	if worst > outageMaxBound {
		t.Errorf("a deletion was corrected only %s after the API server was back and the gate allowed it, want every one within %s: %v", worst, outageMaxBound, took)
	}
	// Leave the cluster as the next test expects it. kwok resynced its pods
	// after each restart (testcluster.StartAPIServer); the controller must
	// report the rollout it sees.
	e.waitRecovered()
	e.waitState(c, "Running")
}
