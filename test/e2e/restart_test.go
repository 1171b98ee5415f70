package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Foreign writes the controller did not see being made: an edit while it was
// stopped, and a replacement (new UID) while it runs. Both add fields and
// keep the spec-hash annotation, so only a comparison with the whole desired
// spec finds them.

// sidecar is the container someone else appends.
var sidecar = corev1.Container{Name: "e2e-sidecar", Image: "quay.io/someone/sidecar:latest"}

// extraToleration is the toleration someone else adds.
var extraToleration = corev1.Toleration{Key: "e2e.example.com/extra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// updateDaemonSetAsSomeoneElse applies edit to the current DaemonSet and
// returns what the API server stored.
func (e *env) updateDaemonSetAsSomeoneElse(edit func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	e.t.Helper()
	var out *appsv1.DaemonSet
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := e.daemonSet()
		if ds == nil {
			e.t.Fatal("no DaemonSet to edit")
		}
		ds = ds.DeepCopy()
		edit(ds)
		var err error
		out, err = e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("edit the DaemonSet: %v", err)
	}
	return out
}

// watchDaemonSetUntil watches the DaemonSet from resourceVersion rv until cond
// holds for a version of it, and returns that version and when the watch
// delivered it; it fails the test after timeout.
func (e *env) watchDaemonSetUntil(what, rv string, timeout time.Duration, cond func(*appsv1.DaemonSet) bool) (*appsv1.DaemonSet, time.Time) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var found *appsv1.DaemonSet
	var at time.Time
	err := watchNamed(ctx, e.kube.AppsV1().DaemonSets(ns).Watch, name, rv, func(typ watch.EventType, ds *appsv1.DaemonSet) bool {
		if typ == watch.Deleted || !cond(ds) {
			return false
		}
		found, at = ds, time.Now()
		return true
	})
	if err != nil {
		e.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
	return found, at
}

// watchNamed watches the object objName with watchFrom, from resourceVersion
// rv, and hands every version of it to done until done returns true. A watch
// the server ends is resumed from the last version seen. It returns ctx's
// error when ctx ends first, and the error of a watch that cannot start.
func watchNamed[T interface{ GetResourceVersion() string }](ctx context.Context, watchFrom func(context.Context, metav1.ListOptions) (watch.Interface, error), objName, rv string, done func(watch.EventType, T) bool) error {
	for {
		w, err := watchFrom(ctx, metav1.ListOptions{
			ResourceVersion: rv, FieldSelector: fields.OneTermEqualSelector("metadata.name", objName).String(),
		})
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(T)
			if !ok {
				continue // an error event: watch again from the last version seen
			}
			rv = obj.GetResourceVersion()
			if done(ev.Type, obj) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func containerNames(ds *appsv1.DaemonSet) []string {
	var out []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// TestSidecarAddedWhileStoppedIsRemovedAtRestart: a restart over the
// untouched DaemonSet costs at most one request, which changes nothing. Then,
// while no controller runs, someone appends a sidecar container and keeps the
// spec-hash annotation, and the DaemonSet controller rolls it out. The
// restarted controller removes it within seconds, with one update of the same
// object.
func TestSidecarAddedWhileStoppedIsRemovedAtRestart(t *testing.T) {
	// repairBound is "within seconds": the process starts, takes the lease
	// its predecessor released, syncs its caches and writes once.
	const repairBound = 15 * time.Second
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	c := e.startController(controllerOpts{kubeconfig: kubeconfig})
	want := e.waitRolledOut()
	e.waitState(c, "Running")

	// A restart over the untouched object.
	c.stop()
	requests := e.requestLog()
	restarted := time.Now()
	c = e.startController(controllerOpts{kubeconfig: kubeconfig})
	e.waitState(c, "Running")
	requests.flush()
	untouched := requests.cost(user, restarted, time.Now())
	t.Logf("restart over the untouched DaemonSet: writes %s", joinOrNone(untouched.writes))
	if n := untouched.daemonSetWrites + untouched.conflicts; n > 1 || n == 1 && !containsPrefix(untouched.writes, "update daemonsets/") {
		t.Errorf("the restart over the untouched DaemonSet sent %d DaemonSet writes, want at most one update: %s", n, joinOrNone(untouched.writes))
	}
	if cur := e.daemonSet(); cur == nil {
		t.Fatal("the DaemonSet is gone after the restart")
	} else if cur.UID != want.UID || cur.ResourceVersion != want.ResourceVersion || cur.Generation != want.Generation {
		t.Errorf("the restart over the untouched DaemonSet changed it: resourceVersion %s -> %s, generation %d -> %d",
			want.ResourceVersion, cur.ResourceVersion, want.Generation, cur.Generation)
	}
	c.stop()

	tampered := e.updateDaemonSetAsSomeoneElse(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, sidecar)
	})
	if h := tampered.Annotations[resources.SpecHashAnnotation]; h == "" || h != want.Annotations[resources.SpecHashAnnotation] {
		t.Fatalf("the edit did not keep the spec-hash annotation: %q, was %q", h, want.Annotations[resources.SpecHashAnnotation])
	}
	tampered = e.waitDaemonSet("the sidecar rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Generation == tampered.Generation
	})

	requests = e.requestLog()
	restarted = time.Now()
	c = e.startController(controllerOpts{kubeconfig: kubeconfig})
	repaired, at := e.watchDaemonSetUntil("the sidecar removed", tampered.ResourceVersion, repairBound, func(ds *appsv1.DaemonSet) bool {
		return !slices.Contains(containerNames(ds), sidecar.Name)
	})
	t.Logf("sidecar removed %s after the controller's restart (generation %d -> %d)",
		at.Sub(restarted).Round(time.Millisecond), tampered.Generation, repaired.Generation)
	if repaired.UID != tampered.UID {
		t.Errorf("the DaemonSet was replaced (UID %s -> %s), want it updated", tampered.UID, repaired.UID)
	}
	if got, exp := containerNames(repaired), containerNames(want); !slices.Equal(got, exp) {
		t.Errorf("containers after the repair %v, want %v", got, exp)
	}
	e.waitDaemonSet("the repair rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Generation == repaired.Generation
	})
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	requests.flush()
	cost := requests.cost(user, restarted, time.Now())
	t.Logf("the restarted controller's writes: %s", joinOrNone(cost.writes))
	// Each refused write must have lost to another client's (the DaemonSet
	// controller's status stream), as in TestRequestCostsAtProductionDefaults.
	if cost.daemonSetWrites != 1 || cost.unexplained > 0 || cost.conflicts > 4 || !containsPrefix(cost.writes, "update daemonsets/") {
		t.Errorf("the repair wrote the DaemonSet %d times (and %d refused with a conflict, %d with no other write before), want one update: %s",
			cost.daemonSetWrites, cost.conflicts, cost.unexplained, joinOrNone(cost.writes))
	}
}

// replaceDaemonSetAsSomeoneElse deletes the DaemonSet and creates repl in its
// place, as `kubectl replace --force` does. The controller is paused
// (SIGSTOP) for the two requests, so that it does not recreate the DaemonSet
// in between (it reacts within milliseconds): it then reads the deletion and
// the creation from its watch.
func (e *env) replaceDaemonSetAsSomeoneElse(c *controller, repl *appsv1.DaemonSet) *appsv1.DaemonSet {
	e.t.Helper()
	ctx := context.Background()
	old := e.daemonSet()
	if old == nil {
		e.t.Fatal("no DaemonSet to replace")
	}
	c.pause()
	defer c.resume()
	err := e.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(old.UID))})
	if err != nil {
		e.t.Fatalf("delete the DaemonSet: %v", err)
	}
	created, err := e.kube.AppsV1().DaemonSets(ns).Create(ctx, repl.DeepCopy(), metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create the replacement: %v", err)
	}
	return created
}

// TestReplacedDaemonSetWithExtraTolerationIsRepaired: while the controller
// runs, someone replaces the DaemonSet (delete and create: a new UID) with a
// copy that carries one more toleration and the same spec-hash annotation.
// The controller sees both in its watch and repairs the new object in place.
func TestReplacedDaemonSetWithExtraTolerationIsRepaired(t *testing.T) {
	e := newEnv(t)
	c, want := e.deployed(controllerOpts{})
	e.waitState(c, "Running")

	repl := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: want.Labels, Annotations: want.Annotations},
		Spec:       *want.Spec.DeepCopy(),
	}
	repl.Spec.Template.Spec.Tolerations = append(repl.Spec.Template.Spec.Tolerations, extraToleration)
	created := e.replaceDaemonSetAsSomeoneElse(c, repl)
	if created.UID == want.UID {
		t.Fatal("the replacement kept the UID")
	}
	replaced := time.Now() // the controller resumes now
	repaired, at := e.watchDaemonSetUntil("the extra toleration removed", created.ResourceVersion, convergeTimeout, func(ds *appsv1.DaemonSet) bool {
		return !slices.Contains(ds.Spec.Template.Spec.Tolerations, extraToleration)
	})
	t.Logf("replacement %s (generation %d) repaired %s after its creation (generation %d)",
		created.UID, created.Generation, at.Sub(replaced).Round(time.Millisecond), repaired.Generation)
	if repaired.UID != created.UID {
		t.Errorf("the replacement was itself replaced (UID %s -> %s), want it updated", created.UID, repaired.UID)
	}
	if got, exp := repaired.Spec.Template.Spec.Tolerations, want.Spec.Template.Spec.Tolerations; !apiequality.Semantic.DeepEqual(got, exp) {
		t.Errorf("tolerations after the repair %v, want %v", got, exp)
	}
	e.waitDaemonSet("the repair rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.UID == created.UID && ds.Generation == repaired.Generation
	})
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}
