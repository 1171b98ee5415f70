package runtimeextractor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// The test of the rollout deadline, and the only one that shortens it: a
// rollout that stops short of one node becomes Degraded RolloutStuck, naming
// the node and the DaemonSet controller's newest warning, and clears when
// progress resumes.
func TestStuckRolloutIsDegradedWithItsCause(t *testing.T) {
	const deadline = 300 * time.Millisecond
	h := startWith(t, func(h *harness) { h.opts = append(h.opts, WithRolloutDeadline(deadline)) })
	ds := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	ctx := context.Background()

	// Two of three nodes run a ready pod; node-c's pod never becomes ready.
	for i, node := range []string{"node-a", "node-b", "node-c"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: resources.Namespace, Name: "extractor-" + node,
				Labels:          ds.Spec.Selector.MatchLabels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}},
			},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		if i == 2 {
			pod.Status.Conditions[0].Status = corev1.ConditionFalse
		}
		if _, err := h.api.Client.CoreV1().Pods(resources.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.api.Client.CoreV1().Events(resources.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: resources.Namespace, Name: "ds-failed"},
		InvolvedObject: corev1.ObjectReference{Kind: "DaemonSet", Namespace: resources.Namespace, Name: ds.Name, UID: ds.UID},
		Type:           corev1.EventTypeWarning, Reason: "FailedCreate", Message: `pods "x" is forbidden: no PriorityClass with name missing-class was found`,
		LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setCounts := func(updated, available int32) {
		cur := h.stored().DeepCopy()
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
			UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available}
		if _, err := h.api.Client.AppsV1().DaemonSets(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setCounts(3, 2)

	h.eventually("a RolloutStuck verdict", func() bool { return h.ctrl.Status().Stuck != nil })
	s := h.ctrl.Status()
	if s.State != fsm.StateDeploying || !slices.Equal(s.Stuck.Nodes, []string{"node-c"}) || s.Stuck.NotReady != 1 {
		t.Fatalf("stuck verdict %+v in state %s, want node-c, one node not ready", s.Stuck, s.State)
	}
	degraded := status.Conditions(s)[2]
	if degraded.Status != "True" || degraded.Reason != status.ReasonRolloutStuck ||
		!strings.Contains(degraded.Message, "node-c") || !strings.Contains(degraded.Message, "FailedCreate") || !strings.Contains(degraded.Message, "missing-class") {
		t.Fatalf("Degraded is %s %s %q, want RolloutStuck naming node-c and the FailedCreate", degraded.Status, degraded.Reason, degraded.Message)
	}
	if w := h.changes.with(ReasonRolloutStuck); len(w) != 1 || w[0].eventType != corev1.EventTypeWarning {
		t.Fatalf("got %+v, want one RolloutStuck Warning", w)
	}

	// Progress clears it at once.
	setCounts(3, 3)
	h.eventually("the verdict to clear", func() bool { return h.ctrl.Status().Stuck == nil })
	h.waitState(fsm.StateRunning)
}

// A rollout that keeps moving is never stuck, and reads no pod and no Event.
func TestProgressingRolloutIsNotStuck(t *testing.T) {
	const deadline = 300 * time.Millisecond
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
