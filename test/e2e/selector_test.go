package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/runtimeextractor"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// foreignLabels are the labels, selector and pod labels of the DaemonSet
// someone else puts in place of the controller's.
var foreignLabels = map[string]string{"app": "e2e-someone-else"}

// TestReplacementWithAnotherSelectorIsReplacedAtStart: while the controller
// is stopped, someone replaces the DaemonSet (`oc replace --force`: delete
// and create) with one whose selector and labels differ, and its pods run.
// spec.selector is immutable, so no update can make that object ours: the
// restarted controller deletes it (by UID) and creates its own within
// seconds, the foreign pods go, and the Created Event says why.
func TestReplacementWithAnotherSelectorIsReplacedAtStart(t *testing.T) {
	// replaceBound is "within seconds": the process starts, takes the lease
	// its predecessor released, syncs its caches, and sends the update the
	// server refuses, the delete and the create.
	const replaceBound = 15 * time.Second
	e := newEnv(t)
	ctx := context.Background()
	c, want := e.deployed(controllerOpts{})
	e.waitState(c, "Running")
	c.stop()

	repl := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: foreignLabels},
		Spec:       *want.Spec.DeepCopy(),
	}
	repl.Spec.Selector = &metav1.LabelSelector{MatchLabels: foreignLabels}
	repl.Spec.Template.Labels = foreignLabels
	err := e.kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(want.UID))})
	if err != nil {
		t.Fatalf("delete the DaemonSet: %v", err)
	}
	foreign, err := e.kube.AppsV1().DaemonSets(ns).Create(ctx, repl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the replacement: %v", err)
	}
	foreign = e.waitDaemonSet("the replacement rolled out", func(ds *appsv1.DaemonSet) bool {
		return e.rolledOut(ds) && ds.UID == foreign.UID
	})
	foreignSelector := metav1.FormatLabelSelector(foreign.Spec.Selector)
	if n := e.podCount(foreignSelector); n == 0 {
		t.Fatalf("no pods match the replacement's selector %s", foreignSelector)
	}

	started := time.Now()
	c = e.startController(controllerOpts{})
	ours, at := e.watchDaemonSetUntil("the DaemonSet ours again", foreign.ResourceVersion, replaceBound, func(ds *appsv1.DaemonSet) bool {
		return ds.UID != foreign.UID && apiequality.Semantic.DeepEqual(ds.Spec, want.Spec) &&
			ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
	})
	t.Logf("replacement %s (selector %s) replaced by %s %s after the controller's start",
		foreign.UID, foreignSelector, ours.UID, at.Sub(started).Round(time.Millisecond))

	e.waitDaemonSet("ours rolled out", func(ds *appsv1.DaemonSet) bool { return e.rolledOut(ds) && ds.UID == ours.UID })
	e.waitState(c, "Running")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
	e.eventually("the replacement's pods gone", func(context.Context) (bool, error) {
		return e.podCount(foreignSelector) == 0, nil
	})
	e.eventually("a Created Event on ours naming the replaced selector", func(context.Context) (bool, error) {
		for _, ev := range e.events(runtimeextractor.ReasonCreated) {
			if ev.InvolvedObject.UID == ours.UID && strings.Contains(ev.Message, string(foreign.UID)) &&
				strings.Contains(ev.Message, foreignSelector) && strings.Contains(ev.Message, "immutable") {
				t.Logf("Event %s: %s", ev.Reason, ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if cur := e.daemonSet(); cur == nil || cur.UID != ours.UID {
		t.Errorf("the DaemonSet changed again after the replace: %v", cur)
	}
}

// podCount counts the pods in the namespace that match selector.
func (e *env) podCount(selector string) int {
	e.t.Helper()
	pods, err := e.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatalf("list pods %s: %v", selector, err)
	}
	return len(pods.Items)
}
