package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// killSeedEnv overrides the seed of the kill cycles, to replay a run.
const killSeedEnv = "FAULT_SEED"

// killSeed returns FAULT_SEED when set, else def, and logs how to replay.
func killSeed(t *testing.T, def uint64) uint64 {
	t.Helper()
	seed := def
	if s := os.Getenv(killSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", killSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, killSeedEnv, seed)
	return seed
}

// killCycler runs the kill-at-random-point cycle of TestRandomKillsConverge
// and TestSoakRandomKills: a random perturbation (config toggle, DaemonSet
// delete, version bump), a SIGKILL of the controller a random moment after
// it, a new controller, and the wait for it to converge. The controllers run
// at the binary's defaults, leader election off (see TestRandomKillsConverge).
type killCycler struct {
	e    *env
	rng  *rand.Rand
	opts controllerOpts
	c    *controller // the running controller

	enabled bool   // what the config asks for
	version string // the ClusterVersion's desired version
	patch   int
}

// newKillCycler starts the first controller and waits for the rollout.
func (e *env) newKillCycler(seed uint64) *killCycler {
	e.t.Helper()
	k := &killCycler{
		e:   e,
		rng: rand.New(rand.NewPCG(seed, seed)),
		// The cycles show the logs of the two controllers of a failed cycle.
		opts:    controllerOpts{args: []string{"--disable-leader-election"}, ownLogReport: true},
		enabled: true,
		version: testcluster.DefaultVersion,
	}
	k.c = e.startController(k.opts)
	e.waitRolledOut()
	return k
}

// cycleResult is what one cycle did and saw.
type cycleResult struct {
	run       int
	what      string        // the perturbation
	delay     time.Duration // from the perturbation to the kill
	enabled   bool
	version   string
	killedAt  time.Time
	killed    *controller
	restarted *controller
	// took is from the kill to convergence or, when not converged, to when
	// the wait gave up.
	took time.Duration
	ok   bool
	// seen is what the controller and the cluster showed when the cycle
	// missed its bound: it tells a controller that stopped short from a
	// rollout the cluster's own controllers are slow to make.
	seen string
}

func (r cycleResult) String() string {
	outcome := "converged"
	if !r.ok {
		outcome = "NOT converged"
	}
	return fmt.Sprintf("run %3d: %-28s killed after %4dms, %s (%s) %s after the kill",
		r.run, r.what, r.delay.Milliseconds(), outcome, r.want(), r.took.Round(time.Millisecond))
}

func (r cycleResult) want() string {
	if r.enabled {
		return "Running, rolled out at " + r.version
	}
	return "Disabled, no DaemonSet"
}

// logs returns the end of the killed controller's log and of its successor's,
// whose transitions (-v 4 logs every one) tell where it stopped.
func (r cycleResult) logs() string {
	return fmt.Sprintf("%s\nkilled controller %d, last lines:\n%s\nrestarted controller %d, last lines:\n%s",
		r.seen, r.killed.PID(), tail(r.killed.Log, 15), r.restarted.PID(), tail(r.restarted.Log, 40))
}

// cycle perturbs, kills the controller at a random point, starts a new one and
// waits up to bound for it to converge.
func (k *killCycler) cycle(run int, bound time.Duration) cycleResult {
	k.e.t.Helper()
	r := cycleResult{run: run}
	switch k.rng.IntN(3) {
	case 0:
		k.enabled = !k.enabled
		r.what = "enable"
		config := enabledConfig
		if !k.enabled {
			r.what, config = "disable", disabledConfig
		}
		k.e.setConfig(config)
	case 1:
		r.what = "delete the DaemonSet"
		err := k.e.kube.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			k.e.t.Fatal(err)
		}
	case 2:
		k.patch++
		k.version = fmt.Sprintf("4.22.%d", k.patch)
		r.what = "bump the version to " + k.version
		k.e.setClusterVersion(k.version)
	}
	r.enabled, r.version = k.enabled, k.version
	// The controller reacts within tens of milliseconds and kwok rolls out
	// in about a second: most kill points fall inside the reaction.
	r.delay = time.Duration(k.rng.IntN(600)) * time.Millisecond
	time.Sleep(r.delay) // the random kill point
	r.killed = k.c
	k.c.kill()
	r.killedAt = time.Now()
	k.c = k.e.startController(k.opts)
	r.restarted = k.c
	r.ok = k.waitConverged(bound)
	r.took = time.Since(r.killedAt)
	if !r.ok {
		r.seen = k.observed()
	}
	return r
}

// observed describes the controller's state and the DaemonSet as they are.
func (k *killCycler) observed() string {
	state := k.c.state()
	if state == "" {
		state = "unknown (/metrics unreadable)"
	}
	ds := k.e.daemonSet()
	if ds == nil {
		return fmt.Sprintf("controller state %s; no DaemonSet", state)
	}
	st := ds.Status
	return fmt.Sprintf("controller state %s; DaemonSet uid %s generation %d (observed %d), version %q, pods desired %d updated %d available %d",
		state, ds.UID, ds.Generation, st.ObservedGeneration, ds.Annotations[resources.VersionAnnotation],
		st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberAvailable)
}

// converged: the running controller reports the state the config asks for,
// and the cluster agrees.
func (k *killCycler) converged() bool {
	want := "Running"
	if !k.enabled {
		want = "Disabled"
	}
	if k.c.state() != want {
		return false
	}
	ds := k.e.daemonSet()
	if !k.enabled {
		return ds == nil
	}
	return k.e.rolledOut(ds) && ds.Annotations[resources.VersionAnnotation] == k.version &&
		ds.Spec.Template.Annotations[resources.VersionAnnotation] == "" // the version is on the DaemonSet only
}

// waitConverged polls for convergence for up to timeout.
func (k *killCycler) waitConverged(timeout time.Duration) bool {
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return k.converged(), nil
	})
	return err == nil
}

// staysConverged checks that the last controller stays converged for d: no
// late action of a stale decision may remove or resurrect the DaemonSet.
func (k *killCycler) staysConverged(d time.Duration) {
	k.e.t.Helper()
	ds := k.e.daemonSet()
	rv := "0"
	if ds != nil {
		rv = ds.ResourceVersion
	} else if list, err := k.e.kube.AppsV1().DaemonSets(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		rv = list.ResourceVersion
	}
	for _, ev := range k.e.quietFor(rv, d) {
		if ev.Type == watch.Deleted || ev.Type == watch.Added {
			k.e.t.Fatalf("the DaemonSet was %s after convergence (enabled=%v)", ev.Type, k.enabled)
		}
		if cur, ok := ev.Object.(*appsv1.DaemonSet); ok && k.enabled && cur.Annotations[resources.VersionAnnotation] != k.version {
			k.e.t.Fatalf("the DaemonSet's version became %q after convergence at %s", cur.Annotations[resources.VersionAnnotation], k.version)
		}
	}
}
