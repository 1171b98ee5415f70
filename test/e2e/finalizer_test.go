package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/insights-runtime-extractor/controller/pkg/status"
	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// heldBy is the foreign finalizer that holds the DaemonSet's deletion.
const heldBy = "e2e.example.com/hold"

// setFinalizers sets the DaemonSet's finalizers, as another controller
// (a backup tool, a policy engine) does.
func (e *env) setFinalizers(finalizers ...string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers}})
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.kube.AppsV1().DaemonSets(ns).Patch(context.Background(), name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "e2e-finalizer-owner"})
	if err != nil {
		e.t.Fatalf("set the DaemonSet's finalizers to %v: %v", finalizers, err)
	}
}

// TestFinalizerHeldDeleteIsReportedUntilGone: insights-config disables the
// runtime extractor while someone else's finalizer holds the DaemonSet. The
// controller sends one DELETE and no more over 30 s (the object is being
// deleted; another DELETE changes nothing), and Available and Progressing say
// Deleting and name the finalizer for as long as the object, and its
// privileged pods, remain: a DELETE that returned is not an object gone. Once
// the finalizer is removed, the object goes and the conditions say Disabled.
func TestFinalizerHeldDeleteIsReportedUntilGone(t *testing.T) {
	const watchFor = 30 * time.Second
	e := newEnv(t)
	// As the shipped ServiceAccount, so that the audit log names its requests.
	kubeconfig, _ := e.controllerAccountKubeconfig()
	e.deployed(controllerOpts{kubeconfig: kubeconfig})
	e.setFinalizers(heldBy)
	t.Cleanup(func() {
		if e.daemonSet() != nil {
			e.setFinalizers()
		}
	})
	log := e.requestLog()
	from := time.Now()
	e.setConfig(disabledConfig)
	e.waitDaemonSet("the DaemonSet being deleted", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.DeletionTimestamp != nil })
	avail := e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDeleting)
	prog := e.waitCondition(status.ConditionProgressing, configv1.ConditionTrue, status.ReasonDeleting)
	for _, c := range []*configv1.ClusterOperatorStatusCondition{avail, prog} {
		if !strings.Contains(c.Message, heldBy) {
			t.Errorf("%s=%s [%s] %q does not name the finalizer %s", c.Type, c.Status, c.Reason, c.Message, heldBy)
		}
	}
	t.Logf("while held: %s=%s [%s] %q", prog.Type, prog.Status, prog.Reason, prog.Message)

	time.Sleep(time.Until(from.Add(watchFor))) // a fixed window to count requests in, not a wait for a condition
	for _, typ := range []configv1.ClusterStatusConditionType{status.ConditionAvailable, status.ConditionProgressing} {
		if c := e.condition(typ); c == nil || c.Reason != status.ReasonDeleting {
			t.Errorf("%s after %s: %+v; want Deleting while the finalizer holds the DaemonSet", typ, watchFor, c)
		}
	}
	log.flush()
	var deletes []string
	for _, w := range log.writes(testcluster.ServiceAccountUser(ns, controllerAccount), from, time.Now()) {
		if strings.HasPrefix(w, "delete daemonsets/") {
			deletes = append(deletes, w)
		}
	}
	t.Logf("DELETEs of the DaemonSet in %s: %s", watchFor, joinOrNone(deletes))
	if len(deletes) != 1 {
		t.Errorf("%d DELETEs of the DaemonSet in %s (%s), want 1", len(deletes), watchFor, joinOrNone(deletes))
	}

	e.setFinalizers()
	e.waitDaemonSet("the DaemonSet gone", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	e.waitCondition(status.ConditionAvailable, configv1.ConditionTrue, status.ReasonDisabled)
	e.waitCondition(status.ConditionProgressing, configv1.ConditionFalse, status.ReasonDisabled)
}

// TestFinalizerHeldDeleteThenEnableCreatesAnew (issue 33, defect 1):
// insights-config disables the runtime extractor while someone else's
// finalizer holds the DaemonSet, and enables it again during the hold. The
// apply finds the object terminating and cannot write it; Progressing says
// so and names the finalizer. Once the finalizer is removed, a live
// DaemonSet is back within 15 s (before the fix: none until the resync, 10
// minutes later).
func TestFinalizerHeldDeleteThenEnableCreatesAnew(t *testing.T) {
	e := newEnv(t)
	kubeconfig, _ := e.controllerAccountKubeconfig()
	_, ds := e.deployed(controllerOpts{kubeconfig: kubeconfig})
	e.setFinalizers(heldBy)
	t.Cleanup(func() {
		if cur := e.daemonSet(); cur != nil && len(cur.Finalizers) > 0 {
			e.setFinalizers()
		}
	})
	e.setConfig(disabledConfig)
	e.waitDaemonSet("the DaemonSet being deleted", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.DeletionTimestamp != nil })
	e.setConfig(enabledConfig)
	var prog *configv1.ClusterOperatorStatusCondition
	e.eventually("Progressing naming the finalizer while enabled", func(context.Context) (bool, error) {
		prog = e.condition(status.ConditionProgressing)
		return prog != nil && prog.Reason == status.ReasonRollingOut && strings.Contains(prog.Message, heldBy), nil
	})
	t.Logf("held, enabled: %s=%s [%s] %q", prog.Type, prog.Status, prog.Reason, prog.Message)
	e.setFinalizers()
	removed := time.Now()
	var created *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		created = e.daemonSet()
		return created != nil && created.UID != ds.UID && created.DeletionTimestamp == nil, nil
	})
	if err != nil {
		t.Fatalf("no live DaemonSet within a minute of the finalizer's removal (the held one was %s)", ds.UID)
	}
	took := time.Since(removed)
	t.Logf("a DaemonSet created anew %s after the finalizer's removal", took.Round(10*time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the DaemonSet was created anew %s after the finalizer's removal, want within 15s", took.Round(10*time.Millisecond))
	}
	e.waitRolledOut()
}
