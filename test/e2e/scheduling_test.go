package e2e

import (
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

const gpuTaintKey = "example.com/gpu"

// taint adds (or with add=false removes) the NoSchedule GPU taint on node.
func (e *env) taint(node string, add bool) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := e.kube.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var kept []corev1.Taint
		for _, tt := range n.Spec.Taints {
			if tt.Key != gpuTaintKey {
				kept = append(kept, tt)
			}
		}
		if add {
			kept = append(kept, corev1.Taint{Key: gpuTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = kept
		_, err = e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("taint %s: %v", node, err)
	}
}

const tolerationConfig = `dataReporting:
  disableRuntimeExtractor: false
  runtimeExtractor:
    tolerations:
    - key: example.com/gpu
      operator: Exists
      effect: NoSchedule
`

func TestTolerationsThroughConfig(t *testing.T) {
	e := newEnv(t)
	node := e.cluster.Nodes[0]
	e.taint(node, true)
	t.Cleanup(func() { e.taint(node, false) })

	e.startController(controllerOpts{})
	want := int32(len(e.cluster.Nodes) - 1)
	ds := e.waitDaemonSet("the tainted node skipped", func(ds *appsv1.DaemonSet) bool {
		r := resources.RolloutOf(ds)
		return r.Complete() && r.Desired == want
	})
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)

	e.setConfig(tolerationConfig)
	ds = e.waitDaemonSet("a pod on the tainted node", func(cur *appsv1.DaemonSet) bool {
		return e.rolledOut(cur) && cur.UID == ds.UID // one update, no delete and recreate
	})
	found := false
	for _, tol := range ds.Spec.Template.Spec.Tolerations {
		found = found || tol.Key == gpuTaintKey
	}
	if !found {
		t.Fatalf("toleration missing from the DaemonSet: %+v", ds.Spec.Template.Spec.Tolerations)
	}
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)

	// An invalid toleration is refused whole: nothing deployed changes.
	e.setConfig(strings.Replace(tolerationConfig, "effect: NoSchedule", "effect: Sometimes", 1))
	c := e.waitCondition(status.ConditionDegraded, configv1.ConditionTrue, status.ReasonInvalidConfig)
	if !strings.Contains(c.Message, "dataReporting.runtimeExtractor.tolerations[0].effect") {
		t.Fatalf("Degraded message does not name the field: %q", c.Message)
	}
	cur := e.daemonSet()
	if cur.Generation != ds.Generation || cur.UID != ds.UID {
		t.Fatal("an invalid toleration changed the DaemonSet")
	}
	warned := false
	for _, ev := range e.events("InvalidConfig") {
		warned = warned || (ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "Sometimes"))
	}
	if !warned {
		t.Fatal("no InvalidConfig Warning naming the bad value")
	}
}

func TestMissingPriorityClassIsVisibleAndRecovers(t *testing.T) {
	e := newEnv(t)
	const class = "runtime-extractor-e2e-missing"
	_ = e.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	t.Cleanup(func() {
		_ = e.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	e.deployed(controllerOpts{})

	e.setConfig("dataReporting:\n  runtimeExtractor:\n    priorityClassName: " + class + "\n")
	// The DaemonSet controller cannot create pods with an unknown class: the
	// rollout stalls and status says so.
	e.waitDaemonSet("the new priority class applied", func(ds *appsv1.DaemonSet) bool {
		return ds != nil && ds.Spec.Template.Spec.PriorityClassName == class
	})
	e.waitCondition(status.ConditionProgressing, configv1.ConditionTrue, "")

	_, err := e.kube.SchedulingV1().PriorityClasses().Create(context.Background(),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	e.waitRolledOut()
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, "")
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonAsExpected)
}
