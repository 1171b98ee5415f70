package runtimeextractor

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// The test of the rollout deadline, and the only one that shortens it: a
// rollout that stops short of one node is named in Progressing, with the node
// and the DaemonSet controller's newest warning, and clears when progress
// resumes. One node of three is within the DaemonSet's maxUnavailable, so it
// is not Degraded (status.Conditions has the rule).
func TestStuckRolloutIsReportedWithItsCause(t *testing.T) {
	const deadline = 300 * time.Millisecond
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithRolloutDeadline(deadline)) })
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	ctx := context.Background()

	// Two of three nodes run a ready pod; node-c's pod never becomes ready.
	createPods(t, h.api.Client, ds, "node-c")
	if _, err := h.api.Client.CoreV1().Events(resources.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: resources.Namespace, Name: "ds-failed"},
		InvolvedObject: corev1.ObjectReference{Kind: "DaemonSet", Namespace: resources.Namespace, Name: ds.Name, UID: ds.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedCreate", Message: `pods "x" is forbidden: no PriorityClass with name missing-class was found`,
		LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// node-c's pod is still to be replaced by one of the current template.
	h.setCounts(3, 2, 2)

	h.eventually("a RolloutStuck verdict", func() bool { return h.ctrl.Status().Stuck != nil })
	s := h.ctrl.Status()
	if s.State != fsm.StateDeploying || !slices.Equal(s.Stuck.Nodes, []string{"node-c"}) || s.Stuck.NotReady != 1 {
		t.Fatalf("stuck verdict %+v in state %s, want node-c, one node not ready", s.Stuck, s.State)
	}
	conds := status.Conditions(s)
	if progressing := conds[1]; progressing.Status != "True" || !strings.Contains(progressing.Message, "rollout made no progress") ||
		!strings.Contains(progressing.Message, "node-c") || !strings.Contains(progressing.Message, "FailedCreate") || !strings.Contains(progressing.Message, "missing-class") {
		t.Fatalf("Progressing is %s %s %q, want it naming node-c and the FailedCreate", progressing.Status, progressing.Reason, progressing.Message)
	}
	if degraded := conds[2]; degraded.Status != "False" {
		t.Fatalf("Degraded is %s %s %q for one node of three, within maxUnavailable", degraded.Status, degraded.Reason, degraded.Message)
	}
	if w := h.changes.with(ReasonRolloutStuck); len(w) != 1 || w[0].eventType != corev1.EventTypeWarning || !strings.Contains(w[0].text, "node-c") {
		t.Fatalf("got %+v, want one RolloutStuck Warning naming node-c", w)
	}

	// Progress clears it at once.
	h.setCounts(3, 3, 3)
	h.eventually("the verdict to clear", func() bool { return h.ctrl.Status().Stuck == nil })
	h.waitState(fsm.StateRunning)
}

// A rollout that keeps moving is never stuck, and reads no pod and no Event.
func TestProgressingRolloutIsNotStuck(t *testing.T) {
	// Progress comes every half deadline; at 300 ms, CI's race run once
	// scheduled the test more than a deadline after its last status write.
	const deadline = 2 * time.Second
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithRolloutDeadline(deadline)) })
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	h.api.Client.ClearActions()
	for available := int32(0); available < 3; available++ {
		cur := h.stored().DeepCopy()
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: available}
		if _, err := h.api.Client.AppsV1().DaemonSets(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadlineAt := time.Now().Add(deadline / 2)
		h.eventually("half the deadline", func() bool { return !time.Now().Before(deadlineAt) })
		if h.ctrl.Status().Stuck != nil {
			t.Fatalf("stuck while progressing (%d available)", available)
		}
	}
	h.rollOut()
	h.waitState(fsm.StateRunning)
	for _, a := range h.api.Client.Actions() {
		if r := a.GetResource().Resource; r == "pods" || r == "events" {
			t.Fatalf("a progressing rollout read %s", r)
		}
	}
}

// A pod that stays unavailable on a rolled-out DaemonSet is no stuck rollout:
// nothing is left to update. The nodes without an available pod are named
// from one pod list once their count has settled, read again only when the
// count changes, and a failed read leaves the names out.
func TestNodesWithoutAnAvailablePodAreNamedOncePerCount(t *testing.T) {
	const deadline = 300 * time.Millisecond
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithRolloutDeadline(deadline)) })
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	createPods(t, h.api.Client, ds, "node-c")
	h.setCounts(3, 3, 2)
	h.waitState(fsm.StateRunning)

	h.eventually("node-c to be named", func() bool { return slices.Equal(h.ctrl.Status().UnavailableNodes, []string{"node-c"}) })
	available := status.Conditions(h.ctrl.Status())[0]
	if available.Reason != status.ReasonPodsUnavailable || !strings.HasSuffix(available.Message, "1 node has no available pod (within maxUnavailable 1): node-c") {
		t.Fatalf("Available is %s %q, want PodsUnavailable naming node-c against maxUnavailable 1", available.Reason, available.Message)
	}
	if n := podLists(h); n != 1 {
		t.Fatalf("%d pod lists, want 1", n)
	}

	// A status update that keeps the count keeps the names: no new read.
	h.setCounts(4, 4, 3)
	h.eventually("4 desired nodes", func() bool { return h.ctrl.Status().Desired == 4 })
	if got := h.ctrl.Status().UnavailableNodes; !slices.Equal(got, []string{"node-c"}) {
		t.Fatalf("names %v after an update that kept the count, want node-c kept", got)
	}

	// A new count drops the names at once; the read for it fails and leaves them out.
	h.api.Client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	h.setCounts(4, 4, 1)
	h.eventually("the names of the old count to go", func() bool {
		s := h.ctrl.Status()
		return s.Available == 1 && s.UnavailableNodes == nil
	})
	h.eventually("a second pod list", func() bool { return podLists(h) == 2 })
	if s := h.ctrl.Status(); s.UnavailableNodes != nil || s.Stuck != nil || s.State != fsm.StateRunning {
		t.Fatalf("after a failed read: names %v, stuck %+v, state %s; want no names, not stuck, Running", s.UnavailableNodes, s.Stuck, s.State)
	}
	if msg := status.Conditions(h.ctrl.Status())[0].Message; !strings.HasSuffix(msg, "3 nodes have no available pod (more than maxUnavailable 2)") {
		t.Fatalf("Available message %q, want the count without names", msg)
	}
}

func podLists(h *harness) int {
	n := 0
	for _, a := range h.api.Client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// setCounts plays the DaemonSet controller's status for the current generation.
func (h *harness) setCounts(desired, updated, available int32) {
	h.t.Helper()
	cur := h.stored().DeepCopy()
	cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: desired, CurrentNumberScheduled: desired,
		UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available, NumberUnavailable: desired - available}
	if _, err := h.api.Client.AppsV1().DaemonSets(cur.Namespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("update status: %v", err)
	}
}

// createPods creates a pod of ds on node-a, node-b and node-c; those on the
// nodes listed in notReady are not ready.
func createPods(t *testing.T, client kubernetes.Interface, ds *appsv1.DaemonSet, notReady ...string) {
	t.Helper()
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		ready := corev1.ConditionTrue
		if slices.Contains(notReady, node) {
			ready = corev1.ConditionFalse
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: resources.Namespace, Name: "extractor-" + node,
				Labels:          ds.Spec.Selector.MatchLabels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}},
			},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
		if _, err := client.CoreV1().Pods(resources.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// WithNodeNames(false) reads no pod: a stuck rollout and a rolled-out
// DaemonSet with a node without an available pod are reported by their
// counts alone, and the diagnosis still reads the DaemonSet's Events.
func TestWithoutNodeNamesNoPodIsRead(t *testing.T) {
	const deadline = 300 * time.Millisecond
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithRolloutDeadline(deadline), WithNodeNames(false)) })
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	createPods(t, h.api.Client, ds, "node-c")

	h.setCounts(3, 2, 2)
	h.eventually("a RolloutStuck verdict", func() bool { return h.ctrl.Status().Stuck != nil })
	if s := h.ctrl.Status(); s.Stuck.NotReady != 1 || s.Stuck.Nodes != nil || len(s.Stuck.Denied) != 0 {
		t.Fatalf("stuck verdict %+v, want one node not ready, unnamed, nothing denied", s.Stuck)
	}
	if progressing := status.Conditions(h.ctrl.Status())[1]; !regexp.MustCompile(`rollout made no progress for [0-9.]+ms: 1 of 3 nodes not ready$`).MatchString(progressing.Message) {
		t.Fatalf("Progressing says %q, want the counts alone", progressing.Message)
	}

	h.setCounts(3, 3, 2)
	h.waitState(fsm.StateRunning)
	h.eventually("the rolled-out counts", func() bool { s := h.ctrl.Status(); return s.Stuck == nil && s.RolledOut })
	// With names, the lookup would list pods once the count has settled.
	settled := time.Now().Add(unavailableSettle + time.Second)
	h.eventually("past the lookup's settling time", func() bool { return !time.Now().Before(settled) })
	if s := h.ctrl.Status(); s.UnavailableNodes != nil || s.UnavailableNodesDenied {
		t.Fatalf("nodes named %v (denied %t) without WithNodeNames", s.UnavailableNodes, s.UnavailableNodesDenied)
	}
	events := 0
	for _, a := range h.api.Client.Actions() {
		switch read := a.GetVerb() == "list" || a.GetVerb() == "get"; {
		case read && a.GetResource().Resource == "pods":
			t.Fatalf("a pod was read: %s", a.GetVerb())
		case read && a.GetResource().Resource == "events":
			events++
		}
	}
	if events != 1 {
		t.Fatalf("%d Event lists, want 1 for the one diagnosis", events)
	}
}
