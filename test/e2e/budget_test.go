package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// TestBurstAndPauseStaysWithinTheBudget runs the controller as its shipped
// ServiceAccount against a writer that undoes its repairs at 0, 1, 3, 7 and
// 15 s, pauses 61 s, and does it again (issue 33: the rhythm that escaped
// the per-writer streaks, 15 controller writes against 15 foreign ones and
// no fight reported). The controller's DaemonSet writes, from the audit log,
// stay within the repair budget B(T) over the whole run, and the writer is
// reported as a fight (RuntimeExtractorDegraded=True [ConflictingWriter])
// before its second burst, and still is when that burst ends.
func TestBurstAndPauseStaysWithinTheBudget(t *testing.T) {
	const manager = "burster"
	e := newEnv(t)
	kubeconfig, user := e.controllerAccountKubeconfig()
	c, ds := e.deployed(controllerOpts{kubeconfig: kubeconfig})
	want := testcluster.ExtractorImage(ds)
	requests := e.requestLog()
	w := &fightWriter{kube: e.kubeClientAs(manager), manager: manager,
		images: [2]string{"quay.io/someone/burst:a", "quay.io/someone/burst:b"}, first: make(chan struct{})}
	ctx := context.Background()
	offsets := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}
	const pause = 61 * time.Second
	start := time.Now()
	writes := 0
	burst := func(from time.Time) {
		for _, at := range offsets {
			// The writer's rhythm is the pattern under test: it waits for
			// its instants, as a client on a timer does.
			time.Sleep(time.Until(from.Add(at)))
			w.write(ctx, w.images[writes%2])
			writes++
		}
	}
	burst(start)
	reported := func(ctx context.Context) (bool, error) {
		d := e.condition(status.ConditionDegraded)
		return d != nil && d.Status == configv1.ConditionTrue && d.Reason == status.ReasonConflictingWriter, nil
	}
	// Reported within the pause (3 undos by the burst's end).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pause-20*time.Second, true, reported); err != nil {
		t.Fatalf("burst and pause not reported as a fight within %s of its first burst's end; Degraded: %+v\ncontroller log (tail):\n%s",
			pause-20*time.Second, e.condition(status.ConditionDegraded), tail(c.Log, 30))
	}
	t.Logf("reported as a fight %s after the first write", time.Since(start).Round(100*time.Millisecond))
	second := start.Add(offsets[len(offsets)-1] + pause)
	burst(second)
	if ok, _ := reported(ctx); !ok {
		t.Errorf("the fight was cleared during the writer's pause: Degraded %+v", e.condition(status.ConditionDegraded))
	}
	// The object is ours again once the writer stopped.
	last := w.summary().writes
	stopped := last[len(last)-1]
	e.eventually("the desired image back after the second burst", func(context.Context) (bool, error) {
		cur := e.daemonSet()
		return cur != nil && testcluster.ExtractorImage(cur) == want, nil
	})
	end := time.Now()
	t.Logf("the desired image back %s after the writer's last write", end.Sub(stopped).Round(100*time.Millisecond))

	requests.flush()
	var ours []time.Time
	for _, ev := range requests.read {
		if ev.User == user && ev.Resource == "daemonsets" && ev.Subresource == "" && ev.IsWrite() && ev.Code >= 200 && ev.Code < 300 &&
			!ev.Received.Before(start) {
			ours = append(ours, ev.Received)
		}
	}
	p := runtimeextractor.DefaultRepairPolicy()
	t.Logf("controller DaemonSet writes %d against the writer's %d, over %s: %s", len(ours), len(last), end.Sub(start).Round(time.Second), offsetsFrom(start, ours))
	for i := range ours {
		for j := i; j < len(ours); j++ {
			if n, d := j-i+1, ours[j].Sub(ours[i]); n > p.Bound(d) {
				t.Errorf("%d controller writes in %s, the repair budget allows %d", n, d.Round(time.Millisecond), p.Bound(d))
			}
		}
	}
	if len(ours) == 0 {
		t.Error("the audit log shows no controller write: the test did not fight")
	}
}

// TestStormIsUndoneWithin5sOfItsEnd: kubectl patch changes the image twice
// (its second change undoes the controller's repair of its first), and 10 s
// later runs a 20 s storm of 5 writes a second. Its last change is undone
// within 5 s of the storm's end (issue 33: the streak schedule put it 31 s
// after the storm's start).
func TestStormIsUndoneWithin5sOfItsEnd(t *testing.T) {
	const manager = "kubectl-patch"
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	want := testcluster.ExtractorImage(ds)
	w := &fightWriter{kube: e.kubeClientAs(manager), manager: manager,
		images: [2]string{"quay.io/someone/patch:a", "quay.io/someone/patch:b"}, first: make(chan struct{})}
	ctx := context.Background()
	back := func(what string) {
		e.eventually(what, func(context.Context) (bool, error) {
			cur := e.daemonSet()
			return cur != nil && testcluster.ExtractorImage(cur) == want, nil
		})
	}
	w.write(ctx, w.images[0])
	back("the first edit undone")
	w.write(ctx, w.images[1])
	back("the second edit undone")
	// 10 s on, the storm; the pause is the scenario's, not a wait for
	// anything.
	storm := time.Now().Add(10 * time.Second)
	time.Sleep(time.Until(storm))
	<-every(ctx, 200*time.Millisecond, 20*time.Second, func(i int) { w.write(ctx, w.images[i%2]) })
	writes := w.summary().writes
	last := writes[len(writes)-1]
	var restored time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cur := e.daemonSet()
		restored = time.Now()
		return cur != nil && testcluster.ExtractorImage(cur) == want, nil
	})
	if err != nil {
		t.Fatalf("the storm's last change was not undone within 30 s of it")
	}
	took := restored.Sub(last)
	t.Logf("%d writes in the storm; its last change undone %s after it", len(writes)-2, took.Round(10*time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the storm's last change was undone %s after it, want within 5s", took.Round(10*time.Millisecond))
	}
}

// offsetsFrom renders ts as offsets from start.
func offsetsFrom(start time.Time, ts []time.Time) string {
	s := ""
	for _, t := range ts {
		s += fmt.Sprintf("%+.1fs ", t.Sub(start).Seconds())
	}
	return s
}

// TestAnAdminsRunOfEditsIsRepairedWithin5s (issue 46, escape 7) runs the
// shipped binary as its ServiceAccount against an admin's run of edits: 3
// deletions back to back; a minute later 3 image edits by kubectl patch; a
// label removal by kubectl label; a 20 s storm of kubectl patch; and, past
// 2 minutes from the start, one more deletion. The repair budget B(T) allows
// every repair, so each change (a storm's last) is undone within 5 s.
func TestAnAdminsRunOfEditsIsRepairedWithin5s(t *testing.T) {
	e := newEnv(t)
	kubeconfig, _ := e.controllerAccountKubeconfig()
	c, ds := e.deployed(controllerOpts{kubeconfig: kubeconfig})
	want := testcluster.ExtractorImage(ds)
	ctx := context.Background()
	patch := &fightWriter{kube: e.kubeClientAs("kubectl-patch"), manager: "kubectl-patch",
		images: [2]string{"quay.io/someone/edit:a", "quay.io/someone/edit:b"}, first: make(chan struct{})}
	// within fails the test unless repaired holds within 5 s of changed.
	within := func(what string, changed time.Time, repaired func(*appsv1.DaemonSet) bool) {
		t.Helper()
		var at time.Time
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			at = time.Now()
			return repaired(e.daemonSet()), nil
		})
		took := at.Sub(changed)
		t.Logf("%s: repaired %s after it", what, took.Round(10*time.Millisecond))
		if err != nil || took > 5*time.Second {
			t.Errorf("%s was repaired %s after it (err %v), want within 5s; controller log (tail):\n%s", what, took.Round(10*time.Millisecond), err, tail(c.Log, 20))
		}
	}
	imageBack := func(cur *appsv1.DaemonSet) bool { return cur != nil && testcluster.ExtractorImage(cur) == want }
	deleteOnce := func(what string) {
		old := e.deleteDaemonSetAsSomeoneElse()
		within(what, time.Now(), func(cur *appsv1.DaemonSet) bool { return cur != nil && cur.UID != old.UID })
	}
	start := time.Now()
	for i := range 3 {
		deleteOnce(fmt.Sprintf("deletion %d", i+1))
	}
	// The scenario's pauses are the admin's, not waits for anything.
	time.Sleep(time.Until(start.Add(time.Minute)))
	for i := range 3 {
		patch.write(ctx, patch.images[i%2])
		within(fmt.Sprintf("image edit %d", i+1), time.Now(), imageBack)
	}
	label := e.kubeClientAs("kubectl-label")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := label.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(cur.Labels, resources.LabelManagedBy)
		_, err = label.AppsV1().DaemonSets(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kubectl-label"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	within("the label removal", time.Now(), func(cur *appsv1.DaemonSet) bool {
		return cur != nil && cur.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	<-patch.run(ctx, 200*time.Millisecond, 20*time.Second)
	writes := patch.summary().writes
	within("the storm's last change", writes[len(writes)-1], imageBack)
	time.Sleep(time.Until(start.Add(2*time.Minute + 5*time.Second)))
	deleteOnce("the last deletion")
}
