package e2e

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// deployed starts a controller and waits for the first rollout and Running.
func (e *env) deployed(o controllerOpts) (*controller, *appsv1.DaemonSet) {
	e.t.Helper()
	c := e.startController(o)
	ds := e.waitRolledOut()
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, "")
	return c, ds
}

func TestFirstDeployRollsOutAndReportsAvailable(t *testing.T) {
	e := newEnv(t)
	c := e.startController(controllerOpts{})
	// Progressing while the kwok nodes start the pods, then Available.
	e.waitDaemonSet("the DaemonSet to be created", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	ds := e.waitRolledOut()
	if got := ds.Annotations[resources.VersionAnnotation]; got != "4.22.0" {
		t.Fatalf("version annotation %q, want the ClusterVersion's 4.22.0", got)
	}
	if ds.Labels[resources.LabelManagedBy] != resources.ManagedByValue {
		t.Fatalf("labels %v", ds.Labels)
	}
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, status.ReasonAsExpected)
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
	// One Event for the change made, on the DaemonSet itself.
	e.eventually("a Created Event on the DaemonSet", func(context.Context) (bool, error) {
		for _, ev := range e.events(runtimeextractor.ReasonCreated) {
			if ev.InvolvedObject.Kind == "DaemonSet" && ev.InvolvedObject.UID == ds.UID && strings.Contains(ev.Message, "first deploy") {
				return true, nil
			}
		}
		return false, nil
	})
	metrics := c.metrics()
	for _, want := range []string{
		`runtime_extractor_state{state="Running"} 1`,
		`runtime_extractor_transitions_total{event="RolloutComplete",from="Deploying",to="Running"} 1`,
		`runtime_extractor_actions_total{action="Apply",result="success"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The bench reads the live heap after a collection it asks for through
	// the served heap profile: the cluster's admin may ask, and one runs
	// (the runtime counts forced collections apart).
	const cycles = "go_gc_cycles_forced_gc_cycles_total"
	before := metricSum(metrics, cycles)
	if err := c.CollectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := metricSum(c.metrics(), cycles); after <= before {
		t.Errorf("%s %v after CollectGarbage, %v before: no forced collection ran", cycles, after, before)
	}
}

func TestDeletedDaemonSetIsRestored(t *testing.T) {
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet("a new DaemonSet", func(cur *appsv1.DaemonSet) bool { return cur != nil && cur.UID != ds.UID })
	e.waitRolledOut()
}

func TestChangedImageIsRestored(t *testing.T) {
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	want := ds.Spec.Template.Spec.Containers[0].Image
	ds = ds.DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	if _, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDaemonSet("the image restored", func(cur *appsv1.DaemonSet) bool {
		return cur != nil && cur.Spec.Template.Spec.Containers[0].Image == want && cur.Generation > ds.Generation
	})
	e.waitRolledOut()
}

// TestRemovedLabelIsRestored removes an owned label, a change that leaves the
// generation as it is, and wants it back within seconds, at the default
// 10-minute resync: the drift itself must trigger the repair, not the resync.
func TestRemovedLabelIsRestored(t *testing.T) {
	// restoreBound is "promptly": drift repair takes well under a second
	// here; the rest is slack for a busy machine.
	const restoreBound = 10 * time.Second
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	ds = ds.DeepCopy()
	delete(ds.Labels, resources.LabelManagedBy)
	if _, err := e.kube.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, restoreBound, true, func(context.Context) (bool, error) {
		cur := e.daemonSet()
		return cur != nil && cur.Labels[resources.LabelManagedBy] == resources.ManagedByValue, nil
	})
	if err != nil {
		t.Fatalf("the %s label was not restored within %s", resources.LabelManagedBy, restoreBound)
	}
	t.Logf("label restored %s after its removal", time.Since(removed).Round(time.Millisecond))
}

// quietFor watches the DaemonSet from resourceVersion rv for d and returns every
// change it saw: proof of absence needs a window, and a watch sees every write.
func (e *env) quietFor(rv string, d time.Duration) []watch.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	w, err := e.kube.AppsV1().DaemonSets(ns).Watch(ctx, metav1.ListOptions{
		ResourceVersion: rv, FieldSelector: "metadata.name=" + name,
	})
	if err != nil {
		e.t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	var seen []watch.Event
	for ev := range w.ResultChan() {
		if ev.Type != watch.Bookmark {
			seen = append(seen, ev)
		}
	}
	return seen
}

func TestStatusChurnCausesNoWrite(t *testing.T) {
	e := newEnv(t)
	e.deployed(controllerOpts{})
	// The DaemonSet controller is done; stop nothing, but churn the status as a
	// noisy kubelet fleet would. The controller must not write.
	var rv string
	for i := 0; i < 50; i++ {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ds := e.daemonSet().DeepCopy()
			ds.Status.NumberMisscheduled = int32(i % 2)
			upd, err := e.kube.AppsV1().DaemonSets(ns).UpdateStatus(context.Background(), ds, metav1.UpdateOptions{})
			if err == nil {
				rv = upd.ResourceVersion
			}
			return err
		})
		if err != nil {
			t.Fatalf("update status: %v", err)
		}
	}
	// The DaemonSet controller may rewrite status in the window; any write of
	// the controller's would change the spec (generation) or the metadata.
	base := e.daemonSet()
	for _, ev := range e.quietFor(rv, 5*time.Second) {
		ds, ok := ev.Object.(*appsv1.DaemonSet)
		if !ok || ev.Type != watch.Modified {
			t.Fatalf("unexpected %s event after status churn", ev.Type)
		}
		if ds.Generation != base.Generation || !reflect.DeepEqual(ds.Labels, base.Labels) || !reflect.DeepEqual(ds.Annotations, base.Annotations) {
			t.Fatalf("the DaemonSet's spec or metadata was written after status-only churn")
		}
	}
	if g := e.daemonSet().Generation; g != 1 {
		t.Fatalf("generation %d after status churn, want 1 (no spec write)", g)
	}
}

func TestDisableDeletesAndEnableRestores(t *testing.T) {
	e := newEnv(t)
	e.deployed(controllerOpts{})
	e.setConfig("dataReporting:\n  disableRuntimeExtractor: true\n")
	e.waitDaemonSet("the DaemonSet gone", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)

	e.setConfig("dataReporting:\n  disableRuntimeExtractor: false\n")
	e.waitRolledOut()
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}

func TestMalformedConfigLeavesDaemonSetAndWarns(t *testing.T) {
	e := newEnv(t)
	_, ds := e.deployed(controllerOpts{})
	e.setConfig("dataReporting: {disableRuntimeExtractor: maybe")
	e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonInvalidConfig)
	e.eventually("an InvalidConfig warning", func(context.Context) (bool, error) {
		for _, ev := range e.events("InvalidConfig") {
			if ev.Type == "Warning" && strings.Contains(ev.Message, "insights-config") {
				return true, nil
			}
		}
		return false, nil
	})
	cur := e.daemonSet()
	if cur == nil || cur.UID != ds.UID || cur.Generation != ds.Generation {
		t.Fatalf("a malformed config touched the DaemonSet")
	}
	// A good config clears Degraded.
	e.setConfig("dataReporting:\n  disableRuntimeExtractor: false\n")
	e.waitCondition(status.ConditionDegraded, configv1.ConditionFalse, "")
}

func TestClusterVersionBumpUpgrades(t *testing.T) {
	e := newEnv(t)
	c, _ := e.deployed(controllerOpts{})
	before := e.daemonSet().Generation
	e.setClusterVersion("4.22.1")
	// The images do not change here: the version moves the DaemonSet's
	// annotation only, and no pod rolls.
	e.waitDaemonSet("the new version recorded", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.Annotations[resources.VersionAnnotation] == "4.22.1" &&
			ds.Spec.Template.Annotations[resources.VersionAnnotation] == ""
	})
	if after := e.daemonSet().Generation; after != before {
		t.Fatalf("a version change without new images rolled the pods: generation %d -> %d", before, after)
	}
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	// The machine went through Upgrading: the transitions metric counts both edges.
	// (Events of one reason are aggregated by the recorder, so they cannot tell.)
	e.eventually("Running -> Upgrading -> Running in the metrics", func(context.Context) (bool, error) {
		m := c.metrics()
		return strings.Contains(m, `runtime_extractor_transitions_total{event="VersionChanged",from="Running",to="Upgrading"} 1`) &&
			strings.Contains(m, `runtime_extractor_transitions_total{event="RolloutComplete",from="Upgrading",to="Running"} 1`), nil
	})
}

func TestForcedFailureShowsDegraded(t *testing.T) {
	e := newEnv(t)
	// An image reference the controller must refuse: every apply fails.
	e.startController(controllerOpts{env: []string{"RELATED_IMAGE_INSIGHTS_RUNTIME_EXTRACTOR=not a/valid::image"}})
	c := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonApplyFailed)
	if !strings.Contains(c.Message, "RELATED_IMAGE_INSIGHTS_RUNTIME_EXTRACTOR") {
		t.Fatalf("Degraded message does not name the bad variable: %q", c.Message)
	}
	if e.daemonSet() != nil {
		t.Fatal("an invalid image was applied")
	}
}

func TestKilledControllerRestartsAndConverges(t *testing.T) {
	e := newEnv(t)
	c, _ := e.deployed(controllerOpts{})
	c.kill()
	// While it is down: delete the DaemonSet and disable, then enable again.
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startController(controllerOpts{})
	e.waitRolledOut()
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}

func TestOnlyTheLeaderWrites(t *testing.T) {
	e := newEnv(t)
	a := e.startController(controllerOpts{})
	b := e.startController(controllerOpts{})
	e.waitRolledOut()
	leader, standby := a, b
	if !a.logContains("runtime extractor controller started") {
		leader, standby = b, a
	}
	if !leader.logContains("runtime extractor controller started") || standby.logContains("runtime extractor controller started") {
		t.Fatalf("want exactly one active controller (a: %v, b: %v)",
			a.logContains("runtime extractor controller started"), b.logContains("runtime extractor controller started"))
	}
	// Failover: kill the leader; the standby takes over within the lease and repairs drift.
	leader.kill()
	if err := e.kube.AppsV1().DaemonSets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRolledOut()
	if !standby.logContains("runtime extractor controller started") {
		t.Fatal("the standby did not take over")
	}
}
