package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

const (
	enabledConfig  = "dataReporting:\n  disableRuntimeExtractor: false\n"
	disabledConfig = "dataReporting:\n  disableRuntimeExtractor: true\n"

	// outageDuration is how long kube-apiserver stays down in each outage.
	outageDuration = 15 * time.Second
	// retryLine is what the controller logs each time it schedules a retry.
	retryLine = "retrying in"
)

// outage is what the controller did while kube-apiserver was down.
type outage struct {
	connections int64 // TCP connections it opened to reach the API server
	retries     int   // action retries it scheduled
}

func (o outage) String() string {
	return fmt.Sprintf("%d connection attempts and %d action retries in %s", o.connections, o.retries, outageDuration)
}

// apiServerDown keeps kube-apiserver down for outageDuration from stoppedAt,
// checks that the controller lived through it, starts the API server again and
// returns what the controller did meanwhile, counted from before.
func (e *env) apiServerDown(c *controller, proxy *countingProxy, stoppedAt time.Time, before outage) outage {
	e.t.Helper()
	time.Sleep(time.Until(stoppedAt.Add(outageDuration))) // the fault itself: a fixed outage
	if !c.alive() {
		e.t.Fatalf("controller %d exited during the API server outage:\n%s", c.pid(), tail(c.Log, 30))
	}
	during := outage{
		connections: proxy.Connections() - before.connections,
		retries:     c.logCount(retryLine) - before.retries,
	}
	e.startAPIServer()
	return during
}

func (c *controller) outageCounters(proxy *countingProxy) outage {
	return outage{connections: proxy.Connections(), retries: c.logCount(retryLine)}
}

// checkBackoff fails when the controller hammered the API server during an
// outage: its exponential backoff from 100 ms allows about 8 retries in 15 s
// (fewer in practice, as every GET behind the proxy takes 10 s to fail), and
// client-go's informers back off from 800 ms to 30 s. A hot loop would make
// hundreds or thousands of attempts.
func (e *env) checkBackoff(phase string, o outage, wantRetries bool) {
	e.t.Helper()
	e.t.Logf("%s: during the outage the controller made %s", phase, o)
	if wantRetries && o.retries == 0 {
		e.t.Errorf("%s: the failed action was never retried during the outage", phase)
	}
	if o.retries > 15 {
		e.t.Errorf("%s: %d retries in %s: no backoff", phase, o.retries, outageDuration)
	}
	if o.connections > 300 {
		e.t.Errorf("%s: %d connection attempts in %s: no backoff", phase, o.connections, outageDuration)
	}
}

// TestAPIServerOutage stops kube-apiserver for 15 s three times: right after
// the controller created the DaemonSet (Deploying, waiting for the rollout),
// while it creates the DaemonSet (Deploying, the create failing), and while it
// deletes it (Deleting, the delete failing). Each time the process must stay
// up, back off, and converge once the API server is back, without help.
//
// The controller runs with --disable-leader-election: with leader election
// (the 6 s test lease, or OpenShift's 137 s one for a longer outage) it cannot
// renew its lease while the API server is down, and library-go then exits the
// process on purpose; in a cluster the Deployment restarts it. That is the
// normal behaviour, but it would hide what this test observes: one process
// that keeps running and backs off. Restarts are covered by the kill tests.
//
// The controller reaches the API server through a counting TCP proxy, as it
// reaches OpenShift's through a load balancer: while the API server is down,
// every attempt opens a connection, which the proxy accepts and closes. The
// client sees EOF (not "connection refused"), on which client-go retries a GET
// up to 10 times, a second apart, before returning the error.
func TestAPIServerOutage(t *testing.T) {
	e := newEnv(t)
	proxy := e.startCountingProxy()
	ctx := context.Background()

	// Phase 1: the DaemonSet was just created; the rollout has not been seen.
	list, err := e.kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.kube.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	c := e.startController(controllerOpts{kubeconfig: proxy.kubeconfig(t), args: []string{"--disable-leader-election"}})
	waitAdded(t, w, c)
	before := c.outageCounters(proxy)
	stoppedAt := e.stopAPIServer()
	reachedRunning := c.logContains("-> Running")
	o := e.apiServerDown(c, proxy, stoppedAt, before)
	restarted := time.Now()
	e.checkBackoff("after create", o, false)
	if reachedRunning {
		t.Logf("after create: the rollout completed before the API server stopped; the outage hit Running, not Deploying")
	}
	e.waitRecovered()
	rolled := time.Since(restarted)
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	t.Logf("after create: rolled out %s (kube-controller-manager) and Available %s (the controller) after the API server was back",
		rolled.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	// Back to Disabled, so the next phase starts with a create.
	e.setConfig(disabledConfig)
	e.waitDaemonSet("the DaemonSet gone", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)

	// Phase 2: Deploying, the create fails. The controller is paused while the
	// config is enabled, so the change sits in its socket when the API server
	// goes away: it acts on it only when the API server is unreachable.
	restarted = e.faultDuringAction(c, proxy, "create", enabledConfig, "-> Deploying")
	e.waitDaemonSet("the DaemonSet created", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	acted := time.Since(restarted)
	e.waitRecovered()
	rolled = time.Since(restarted)
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	t.Logf("create: the DaemonSet was created %s, rolled out %s and Available %s after the API server was back",
		acted.Round(time.Millisecond), rolled.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	// Phase 3: Deleting, the delete fails.
	restarted = e.faultDuringAction(c, proxy, "delete", disabledConfig, "-> Deleting")
	e.waitDaemonSet("the DaemonSet gone", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	acted = time.Since(restarted)
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	t.Logf("delete: the DaemonSet was deleted %s and Disabled reported %s after the API server was back",
		acted.Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	if !c.alive() {
		t.Fatalf("controller %d exited", c.pid())
	}
	if c.logContainsFold("giving up") {
		t.Error("the controller logged that it gave up")
	}
	// Leave the cluster as the next test expects it: its own controllers back
	// off too, and need up to a minute after an outage to roll anything out.
	e.setConfig(enabledConfig)
	e.waitRecovered()
}

// waitRecovered waits for the DaemonSet to roll out after an outage. The
// rollout is kube-controller-manager's, kube-scheduler's and kwok's work, and
// their informers back off during the outage like any client's (up to 30 s,
// with as much jitter), so this wait is longer than convergeTimeout.
func (e *env) waitRecovered() {
	e.t.Helper()
	const timeout = 3 * time.Minute
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return e.rolledOut(e.daemonSet()), nil
	})
	if err == nil {
		return
	}
	// The rollout is the cluster's work, not the controller's: say what the
	// cluster looked like, and what kwok (the kubelets) failed to do.
	var b strings.Builder
	if ds := e.daemonSet(); ds != nil {
		fmt.Fprintf(&b, "DaemonSet generation %d, status %+v\n", ds.Generation, ds.Status)
	}
	nodes, lerr := e.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if lerr != nil {
		fmt.Fprintf(&b, "list nodes: %v\n", lerr)
	} else {
		for _, n := range nodes.Items {
			var conds []string
			for _, c := range n.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
			}
			fmt.Fprintf(&b, "node %s: conditions %v, taints %v\n", n.Name, conds, n.Spec.Taints)
		}
	}
	fmt.Fprintf(&b, "kwok's errors:\n%s", e.cluster.ComponentLog("kwok", "ERROR", 40))
	e.t.Fatalf("the DaemonSet did not roll out on all %d nodes within %s after the API server outage:\n%s", len(e.cluster.Nodes), timeout, b.String())
}

// faultDuringAction makes the controller carry out its next action (the one
// config asks for) while kube-apiserver is down, and checks it backs off and
// stays up; transition is the log text of the state it must enter. It returns
// when the API server was back.
func (e *env) faultDuringAction(c *controller, proxy *countingProxy, phase, config, transition string) time.Time {
	e.t.Helper()
	entered := c.logCount(transition)
	c.pause()
	sent := proxy.BytesDown()
	e.setConfig(config)
	proxy.waitDownstreamBytes(e.t, sent, 10*time.Second) // the watch event is in its socket
	before := c.outageCounters(proxy)
	stoppedAt := e.stopAPIServer()
	c.resume()
	waitLogCount(e.t, c, transition, entered+1, 10*time.Second)
	waitLogCount(e.t, c, retryLine, before.retries+1, 10*time.Second)
	o := e.apiServerDown(c, proxy, stoppedAt, before)
	restarted := time.Now()
	e.checkBackoff(phase, o, true)
	return restarted
}

func waitLogCount(t *testing.T, c *controller, s string, n int, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return c.logCount(s) >= n, nil
	})
	if err != nil {
		t.Fatalf("controller %d logged %q %d time(s) within %s, want %d:\n%s", c.pid(), s, c.logCount(s), timeout, n, tail(c.Log, 30))
	}
}

// waitAdded waits for the watch to see the DaemonSet created by c.
func waitAdded(t *testing.T, w watch.Interface, c *controller) {
	t.Helper()
	defer w.Stop()
	timeout := time.After(convergeTimeout)
	for {
		select {
		case <-c.Done():
			t.Fatalf("controller %d exited:\n%s", c.pid(), tail(c.Log, 30))
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before the DaemonSet was created")
			}
			if ev.Type == watch.Added {
				return
			}
		case <-timeout:
			t.Fatal("the DaemonSet was not created")
		}
	}
}

// TestRandomKillsConverge SIGKILLs the controller at a random point after a
// random perturbation (config toggle, DaemonSet delete, version bump), 20
// times, and checks that the restarted controller converges every time: the
// DaemonSet rolled out at the current version when enabled, none when
// disabled. The seed is logged; FAULT_SEED=<seed> replays a run. `make soak`
// runs the same cycle 200 times (TestSoakRandomKills).
//
// Leader election is off so that each restart acts at once instead of waiting
// out the killed process's lease (TestLeaderFailoverWithinLease covers that).
func TestRandomKillsConverge(t *testing.T) {
	const runs = 20
	seed := killSeed(t, 20260429)
	e := newEnv(t)
	k := e.newKillCycler(seed)
	began := time.Now()
	for run := 1; run <= runs; run++ {
		r := k.cycle(run, convergeTimeout)
		if !r.ok {
			t.Fatalf("%s\n%s", r, r.logs())
		}
		t.Logf("%s", r)
	}
	k.staysConverged(3 * time.Second)
	t.Logf("%d kills converged in %s", runs, time.Since(began).Round(time.Second))
}

// TestConcurrentImageWriter: another writer sets the DaemonSet's image many
// times a second, a tamper storm: 20 writes a second for 5 s (issue 20: such
// a storm "is corrected within 5 s after it ends") and 50 a second for 10 s.
// Once it stops, the controller restores the image within the case's bound
// (the repair gate waits for the storm to be quiet for 2 s, and no longer),
// the rollout completes, it never gives up, and it does not take the storm
// for a fight: no Degraded ConflictingWriter in any version of the
// ClusterOperator, runtime_extractor_conflicting_writer 0, no
// RuntimeExtractorConflictingWriter Event.
//
// Each case runs its own controller: one remembers the writers' undos for
// 15 minutes, so a second storm on the same process would count the first's
// (and the two together could well be a fight). A new process starts
// without them, as every later test's does.
func TestConcurrentImageWriter(t *testing.T) {
	holdCluster(t) // the subtests run on it, one after the other
	for _, tc := range []struct {
		rate         int
		duration     time.Duration
		restoreBound time.Duration
	}{
		{rate: 20, duration: 5 * time.Second, restoreBound: 5 * time.Second},
		{rate: 50, duration: 10 * time.Second, restoreBound: 10 * time.Second},
	} {
		t.Run(fmt.Sprintf("%dPerSecondFor%s", tc.rate, tc.duration), func(t *testing.T) {
			e := newEnv(t)
			c, ds := e.deployed(controllerOpts{})
			want := ds.Spec.Template.Spec.Containers[0].Image
			m0 := c.metrics()
			recordCtx, stopRecording := context.WithCancel(context.Background())
			defer stopRecording()
			record := e.recordClusterOperator(recordCtx)

			ctx, cancel := context.WithTimeout(context.Background(), tc.duration)
			defer cancel()
			var writes, conflicts, failures atomic.Int64
			ticker := time.NewTicker(time.Second / time.Duration(tc.rate))
			defer ticker.Stop()
			cur := ds.DeepCopy()
			for i := 0; ctx.Err() == nil; i++ {
				select {
				case <-ctx.Done():
					continue
				case <-ticker.C:
				}
				cur.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/intruder/extractor:%d", i)
				upd, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), cur, metav1.UpdateOptions{})
				switch {
				case err == nil:
					writes.Add(1)
					cur = upd
				case apierrors.IsConflict(err):
					// The controller won this round; write over its version next tick.
					conflicts.Add(1)
					if fresh := e.daemonSet(); fresh != nil {
						cur = fresh
					}
				default:
					failures.Add(1)
				}
			}
			stopped := time.Now()
			var restored time.Duration
			err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, tc.restoreBound, true, func(context.Context) (bool, error) {
				cur := e.daemonSet()
				restored = time.Since(stopped)
				return cur != nil && cur.Spec.Template.Spec.Containers[0].Image == want, nil
			})
			if err != nil {
				t.Fatalf("the image was not restored within %s after the writer stopped; controller log (tail):\n%s", tc.restoreBound, tail(c.Log, 20))
			}
			// A fight, once declared, lasts at least 2 minutes after its
			// writer's last undo: had the storm made one, the gauge would
			// still be 1 now.
			atRestore := c.metrics()
			e.waitRolledOut()
			rolled := time.Since(stopped)
			m1 := c.metrics()
			t.Logf("writer: %d writes (%.0f/s), %d conflicts, %d other errors in %s",
				writes.Load(), float64(writes.Load())/tc.duration.Seconds(), conflicts.Load(), failures.Load(), tc.duration)
			t.Logf("controller: %.0f repairs, %.0f applies (%.0f failed), %.0f drift events; image restored %s (bound %s) and rolled out %s after the writer stopped",
				metricSum(m1, "runtime_extractor_repairs_total")-metricSum(m0, "runtime_extractor_repairs_total"),
				metricSum(m1, "runtime_extractor_actions_total", `action="Apply"`)-metricSum(m0, "runtime_extractor_actions_total", `action="Apply"`),
				metricSum(m1, "runtime_extractor_actions_total", `action="Apply"`, `result="error"`)-metricSum(m0, "runtime_extractor_actions_total", `action="Apply"`, `result="error"`),
				metricSum(m1, "runtime_extractor_drift_events_total")-metricSum(m0, "runtime_extractor_drift_events_total"),
				restored.Round(time.Millisecond), tc.restoreBound, rolled.Round(time.Millisecond))
			if writes.Load() < int64(tc.duration.Seconds()) {
				t.Fatalf("the writer managed only %d writes: the test did not fight", writes.Load())
			}
			for _, line := range []string{"\nruntime_extractor_conflicting_writer 0\n", "\nruntime_extractor_degraded{reason=\"ConflictingWriter\"} 0\n"} {
				if !strings.Contains(atRestore, line) || !strings.Contains(m1, line) {
					t.Errorf("/metrics lacks %q right after the restore or after the rollout: the storm was taken for a fight", strings.TrimSpace(line))
				}
			}
			e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
			stopRecording()
			versions, gaps := record.result()
			if gaps > 0 {
				t.Errorf("the ClusterOperator watch broke %d time(s): versions may be missing", gaps)
			}
			if asFight := degradedWith(versions, status.ReasonConflictingWriter); len(asFight) > 0 {
				v := asFight[0]
				d := v.conditions[status.ConditionDegraded]
				t.Errorf("the ClusterOperator (rv %s) reported the storm as a fight: %s %s %q", v.rv, d.Status, d.Reason, d.Message)
			}
			for _, ev := range e.events(runtimeextractor.ReasonConflictingWriter) {
				if ev.InvolvedObject.UID == ds.UID {
					t.Errorf("a %s Event for the storm: %s", ev.Reason, ev.Message)
				}
			}
			if !c.alive() {
				t.Fatalf("controller %d exited", c.pid())
			}
			if c.logContainsFold("giving up") {
				t.Fatal("the controller logged that it gave up")
			}
			if c.logContains("tug-of-war over") {
				t.Error("the controller logged the storm as a tug-of-war")
			}
		})
	}
}

// TestLeaderFailoverWithinLease kills the leader and measures how long the
// standby takes to acquire the Lease: at most the lease duration after the
// leader's last renewal, plus the standby's polling (retry period with
// library-go's jitter of 1.2, twice: it must first see the record unchanged).
// Then the standby must repair drift made while nobody led.
func TestLeaderFailoverWithinLease(t *testing.T) {
	const (
		lease = 6 * time.Second // startController's --leader-elect-lease-duration
		retry = time.Second     // and --leader-elect-retry-period
		// polling: the standby sees the last renewal up to one jittered retry
		// period late, and acquires on its next poll; slack covers API latency
		// on a busy two-core machine.
		polling = time.Duration(2*2.2*float64(retry)) + time.Second
	)
	e := newEnv(t)
	a := e.startController(controllerOpts{})
	b := e.startController(controllerOpts{})
	e.waitRolledOut()
	leader, standby := a, b
	if !a.logContains(logStarted) {
		leader, standby = b, a
	}
	if !leader.logContains(logStarted) || standby.logContains(logStarted) {
		t.Fatalf("want exactly one active controller (a: %v, b: %v)", a.logContains(logStarted), b.logContains(logStarted))
	}
	ctx := context.Background()
	old, err := e.kube.CoordinationV1().Leases(ns).Get(ctx, leaseLock, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leader.kill()
	killed := time.Now()
	last, err := e.kube.CoordinationV1().Leases(ns).Get(ctx, leaseLock, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	standby.waitLog(logStarted, 3*lease)
	cur, err := e.kube.CoordinationV1().Leases(ns).Get(ctx, leaseLock, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.Spec.HolderIdentity == nil || old.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity == *old.Spec.HolderIdentity {
		t.Fatalf("the Lease holder did not change: %v", cur.Spec.HolderIdentity)
	}
	if cur.Spec.AcquireTime == nil || last.Spec.RenewTime == nil {
		t.Fatalf("the Lease lacks acquire or renew times: %+v / %+v", cur.Spec, last.Spec)
	}
	acquired := cur.Spec.AcquireTime.Time
	expired := last.Spec.RenewTime.Add(lease)
	afterKill, afterExpiry := acquired.Sub(killed), acquired.Sub(expired)
	t.Logf("takeover %s after the kill, %s after the lease expired (lease %s, retry period %s)",
		afterKill.Round(time.Millisecond), afterExpiry.Round(time.Millisecond), lease, retry)
	if afterExpiry > polling {
		t.Errorf("the standby took over %s after the lease expired, want at most %s", afterExpiry, polling)
	}
	if afterKill > lease+polling {
		t.Errorf("the standby took over %s after the kill, want at most %s", afterKill, lease+polling)
	}
	e.waitRolledOut()
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}
