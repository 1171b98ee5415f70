package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
)

// Leader election as the platform runs it: the binary at its defaults (no
// --leader-elect-* flag), as the shipped ServiceAccount, with POD_NAME set as
// the Deployment's downward API sets it.

const (
	leaseLock = "runtime-extractor-controller-lock"
	// Log lines of client-go's leader election and of the controller.
	logCampaigning = "Attempting to acquire leader lease"
	logAcquired    = "Successfully acquired lease"
	logStarted     = "runtime extractor controller started"
	// library-go's, when it cannot read the Infrastructure and falls back to
	// the HA timings.
	logNoTopology = "unable to get control plane topology"
)

// startAtDefaultLease runs the binary as startController does, but without
// its short lease flags (args may give some), with POD_NAME=pod.
func (e *env) startAtDefaultLease(kubeconfig, pod string, args ...string) *controller {
	e.t.Helper()
	return e.runController(kubeconfig, append([]string{"-v", "4"}, args...), []string{"POD_NAME=" + pod}, func(c *controller) {
		e.t.Logf("controller %d (POD_NAME=%s) log (tail):\n%s", c.PID(), pod, tail(c.Log, 40))
	})
}

func (e *env) lease() *coordinationv1.Lease {
	e.t.Helper()
	return getIfExists(e.t, "the Lease", e.kube.CoordinationV1().Leases(ns).Get, leaseLock)
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func leaseSeconds(l *coordinationv1.Lease) time.Duration {
	if l == nil || l.Spec.LeaseDurationSeconds == nil {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// waitLeaseHeldBy waits until identity holds the Lease and returns it.
func (e *env) waitLeaseHeldBy(identity string) *coordinationv1.Lease {
	e.t.Helper()
	var l *coordinationv1.Lease
	e.eventually("the Lease held by "+identity, func(context.Context) (bool, error) {
		l = e.lease()
		return holder(l) == identity, nil
	})
	return l
}

// waitRetryPeriod watches the Lease from l, held, until its holder renews
// it a second or more after the renewal before, and returns that gap: the
// holder renews once at once after acquiring, then every retry period
// (without jitter) plus the time its request takes.
func (e *env) waitRetryPeriod(l *coordinationv1.Lease, timeout time.Duration) time.Duration {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	prev := l.Spec.RenewTime
	var gap time.Duration
	err := watchNamed(ctx, e.kube.CoordinationV1().Leases(ns).Watch, leaseLock, l.ResourceVersion, func(_ watch.EventType, cur *coordinationv1.Lease) bool {
		if holder(cur) != holder(l) || cur.Spec.RenewTime == nil || prev == nil || !cur.Spec.RenewTime.After(prev.Time) {
			return false
		}
		if gap = cur.Spec.RenewTime.Sub(prev.Time); gap >= time.Second {
			return true
		}
		prev = cur.Spec.RenewTime
		return false
	})
	if err != nil {
		e.t.Fatalf("no renewal of the Lease within %s: %v", timeout, err)
	}
	return gap
}

// setControlPlaneTopology sets the Infrastructure's controlPlaneTopology, and
// puts the one it had back when the test ends.
func (e *env) setControlPlaneTopology(mode configv1.TopologyMode) {
	e.t.Helper()
	ctx := context.Background()
	set := func(mode configv1.TopologyMode) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			infra, err := e.config.ConfigV1().Infrastructures().Get(ctx, "cluster", metav1.GetOptions{})
			if err != nil {
				return err
			}
			infra.Status.ControlPlaneTopology = mode
			_, err = e.config.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{})
			return err
		})
	}
	infra, err := e.config.ConfigV1().Infrastructures().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	was := infra.Status.ControlPlaneTopology
	e.t.Cleanup(func() {
		if err := set(was); err != nil {
			e.t.Errorf("restore controlPlaneTopology %s: %v", was, err)
		}
	})
	if err := set(mode); err != nil {
		e.t.Fatalf("set controlPlaneTopology %s: %v", mode, err)
	}
}

// electorRequests returns user's Lease requests in [from, to) that carry a
// timeout parameter, by verb and timeout ("update 1m47s"): client-go's leader
// election sends its renew deadline as each one's timeout. library-go's
// server start-up GETs the Lease too, without a timeout, to see that the API
// server answers; those are left out.
func (l *requestLog) electorRequests(user string, from, to time.Time) map[string]int {
	out := map[string]int{}
	for _, ev := range l.read {
		if ev.User != user || ev.Resource != "leases" || ev.Received.Before(from) || !ev.Received.Before(to) {
			continue
		}
		u, err := url.Parse(ev.RequestURI)
		if err != nil {
			l.e.t.Fatalf("audit request URI %q: %v", ev.RequestURI, err)
		}
		if timeout := u.Query().Get("timeout"); timeout != "" {
			out[ev.Verb+" "+timeout]++
		}
	}
	return out
}

// leaseWrites counts user's Lease writes in [from, to).
func (l *requestLog) leaseWrites(user string, from, to time.Time) int {
	n := 0
	for _, ev := range l.read {
		if ev.User == user && ev.Resource == "leases" && ev.IsWrite() && !ev.Received.Before(from) && ev.Received.Before(to) {
			n++
		}
	}
	return n
}

// TestLeaseTimingsFollowTheTopology: without a --leader-elect-* flag the
// timings are library-go's, chosen by the Infrastructure's
// controlPlaneTopology, which the shipped RBAC lets the binary read:
// HighlyAvailable gets 137 s / 107 s / 26 s, SingleReplica 270 s / 240 s /
// 60 s. Given flags win over either. The Lease shows the lease duration, the
// timeout of each Lease request the renew deadline, and the interval between
// renewals the retry period.
func TestLeaseTimingsFollowTheTopology(t *testing.T) {
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	for _, tc := range []struct {
		name     string
		topology configv1.TopologyMode
		args     []string
		// lease and retry are the Lease's, renew the requests' timeout.
		lease, retry time.Duration
		renew        string
	}{
		{name: "HighlyAvailable", topology: configv1.HighlyAvailableTopologyMode,
			lease: 137 * time.Second, renew: "1m47s", retry: 26 * time.Second},
		{name: "SingleReplica", topology: configv1.SingleReplicaTopologyMode,
			lease: 270 * time.Second, renew: "4m0s", retry: 60 * time.Second},
		{name: "SingleReplica with flags", topology: configv1.SingleReplicaTopologyMode,
			args:  []string{"--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "2s"},
			lease: 15 * time.Second, renew: "10s", retry: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, cluster: e.cluster, kube: e.kube, config: e.config}
			if err := e.kube.CoordinationV1().Leases(ns).Delete(context.Background(), leaseLock, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			e.setControlPlaneTopology(tc.topology)
			pod := "runtime-extractor-controller-timings-" + string(tc.topology)
			requests := e.requestLog()
			from := time.Now()
			c := e.startAtDefaultLease(kubeconfig, pod, tc.args...)
			acquired := e.waitLeaseHeldBy(pod)
			retry := e.waitRetryPeriod(acquired, tc.retry+30*time.Second)
			requests.flush()
			to := time.Now()
			elector := requests.electorRequests(user, from, to)
			writes := requests.leaseWrites(user, from, to)
			t.Logf("%s: lease %s, renew deadline (leader election's Lease requests by verb and timeout) %v, retry period %s (between renewals)",
				tc.name, leaseSeconds(acquired), elector, retry.Round(time.Millisecond))
			if got := leaseSeconds(acquired); got != tc.lease {
				t.Errorf("lease duration %s, want %s", got, tc.lease)
			}
			// Every write (acquisition, renewals) is the elector's.
			withDeadline := elector["create "+tc.renew] + elector["update "+tc.renew]
			if writes == 0 || withDeadline != writes {
				t.Errorf("%d Lease writes, %d of them with the timeout %s (all: %v); want all", writes, withDeadline, tc.renew, elector)
			}
			// The renewal follows the period and one request's latency.
			if retry < tc.retry || retry > tc.retry+2*time.Second {
				t.Errorf("first renewal %s after the acquisition, want the retry period %s (up to 2 s more)", retry, tc.retry)
			}
			if c.logContains(logNoTopology) {
				t.Errorf("the controller could not read the topology (%q in its log)", logNoTopology)
			}
			if detected := c.logContains("detected SingleReplicaTopologyMode"); detected != (tc.topology == configv1.SingleReplicaTopologyMode && tc.args == nil) {
				t.Errorf("library-go logged the single-replica timings: %v", detected)
			}
		})
	}
}

// killLeader starts a controller as pod, lets it deploy, SIGKILLs it and
// deletes the DaemonSet while nobody runs. It returns the Lease the killed
// controller left (held, not released) and the list resourceVersion after
// the deletion, from which a watch sees the next creation.
func (e *env) killLeader(kubeconfig, pod string) (*coordinationv1.Lease, string) {
	e.t.Helper()
	ctx := context.Background()
	c := e.startAtDefaultLease(kubeconfig, pod)
	e.waitRolledOut()
	e.waitState(c, "Running")
	c.kill()
	left := e.lease()
	if holder(left) != pod || leaseSeconds(left) != 137*time.Second {
		e.t.Fatalf("the killed controller left the Lease held by %q for %s, want %q for the default 137 s", holder(left), leaseSeconds(left), pod)
	}
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitDaemonSet("the DaemonSet deleted", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	list, err := e.kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return left, list.ResourceVersion
}

// TestCrashRestartWithSamePodNameLeadsAtOnce: a container SIGKILLed and
// restarted in the same pod (same POD_NAME) finds its own Lease and leads at
// once, at the default 137 s lease: the DaemonSet deleted meanwhile is back
// within 10 s of the restart, with one create.
func TestCrashRestartWithSamePodNameLeadsAtOnce(t *testing.T) {
	const bound = 10 * time.Second // issue 19
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	const pod = "runtime-extractor-controller-5d9c7-abcde"
	left, rv := e.killLeader(kubeconfig, pod)

	requests := e.requestLog()
	restarted := time.Now()
	c := e.startAtDefaultLease(kubeconfig, pod)
	_, at := e.watchDaemonSetUntil("the DaemonSet recreated", rv, convergeTimeout, func(ds *appsv1.DaemonSet) bool { return true })
	took := at.Sub(restarted)
	expiry := left.Spec.RenewTime.Add(leaseSeconds(left))
	t.Logf("DaemonSet restored %s after the restart with the same POD_NAME (the old Lease would have expired %s later)",
		took.Round(time.Millisecond), expiry.Sub(at).Round(time.Second))
	if took > bound {
		t.Errorf("the DaemonSet came back %s after the restart, want at most %s", took, bound)
	}
	if !c.logContains(logAcquired) {
		t.Error("the restarted controller did not log that it acquired the Lease")
	}
	now := e.lease()
	if holder(now) != pod || now.Spec.LeaseTransitions == nil || left.Spec.LeaseTransitions == nil ||
		*now.Spec.LeaseTransitions != *left.Spec.LeaseTransitions {
		t.Errorf("Lease after the restart: holder %q, transitions %v; want %q and no new transition (was %v)",
			holder(now), now.Spec.LeaseTransitions, pod, left.Spec.LeaseTransitions)
	}
	e.waitRolledOut()
	requests.flush()
	cost := requests.cost(user, restarted, time.Now())
	t.Logf("the restarted controller's writes: %s", joinOrNone(cost.writes))
	if cost.daemonSetWrites != 1 || !containsPrefix(cost.writes, "create daemonsets/") {
		t.Errorf("the restart wrote the DaemonSet %d times, want one create: %s", cost.daemonSetWrites, joinOrNone(cost.writes))
	}
}

// TestCrashRestartWithAnotherPodNameWaitsForTheLease: a controller in another
// pod (another POD_NAME) must not act while the killed one's Lease is valid.
// It reads the Lease once, leaves it, and in the 20 s the test watches (well
// within the 137 s lease) writes nothing: no DaemonSet, no Lease update.
func TestCrashRestartWithAnotherPodNameWaitsForTheLease(t *testing.T) {
	const watched = 20 * time.Second
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	const killedPod, otherPod = "runtime-extractor-controller-5d9c7-abcde", "runtime-extractor-controller-5d9c7-fghij"
	left, rv := e.killLeader(kubeconfig, killedPod)
	expiry := left.Spec.RenewTime.Add(leaseSeconds(left))

	requests := e.requestLog()
	from := time.Now()
	c := e.startAtDefaultLease(kubeconfig, otherPod)
	c.waitLog(logCampaigning, convergeTimeout)
	events := e.quietFor(rv, watched)
	end := time.Now()
	if !end.Before(expiry) {
		t.Fatalf("the watch ended %s after the old Lease expired: the machine was too slow for this test", end.Sub(expiry))
	}
	requests.flush()
	cost := requests.cost(user, from, end)
	attempts := requests.electorRequests(user, from, end)
	leaseWrites := requests.leaseWrites(user, from, end)
	t.Logf("another POD_NAME, %s watched from its campaign: %d DaemonSet events, leader election's Lease requests %v, %d Lease writes, writes %s; the old Lease expires %s after the watch",
		watched, len(events), attempts, leaseWrites, joinOrNone(cost.writes), expiry.Sub(end).Round(time.Second))
	if len(events) != 0 {
		t.Errorf("the DaemonSet changed while the old Lease was valid: %d events, the first %s", len(events), events[0].Type)
	}
	if cost.daemonSetWrites != 0 || leaseWrites != 0 {
		t.Errorf("the other pod's controller wrote %d times to the DaemonSet and %d to the Lease while the old Lease was valid", cost.daemonSetWrites, leaseWrites)
	}
	// It tries at once, then every retry period (26 s, jittered up to 1.2
	// times): once within the watch.
	if len(attempts) != 1 || attempts["get 1m47s"] != 1 {
		t.Errorf("the other pod's controller sent the Lease requests %v, want one get (its first attempt)", attempts)
	}
	if h := holder(e.lease()); h != killedPod {
		t.Errorf("the Lease is held by %q, want the killed %q until it expires", h, killedPod)
	}
	if c.logContains(logAcquired) || c.logContains(logStarted) {
		t.Error("the other pod's controller acquired the Lease or started while the old one was valid")
	}
	if !c.alive() {
		t.Fatal("the other pod's controller exited")
	}
}
