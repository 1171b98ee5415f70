package runtimeextractor

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Issue 18, defect 3: a replica that was Running when a pod stopped being
// available, and one that starts now over the same cluster, report the same
// conditions: rolled out, with one node named that has no available pod.
func TestFreshReplicaReportsWhatALongRunningOneReports(t *testing.T) {
	long := start(t)
	ds := long.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	createPods(t, long.api.Client, ds, "node-c")
	long.rollOut()
	long.waitState(fsm.StateRunning)
	long.setCounts(3, 3, 2) // node-c's pod stops being ready

	// The same cluster, as a new leader finds it.
	existing := long.stored().DeepCopy()
	existing.ResourceVersion, existing.UID = "", ""
	existing.Status.ObservedGeneration = 1 // the fake API creates it at generation 1
	fresh := startWith(t, func(h *harness) {
		createPods(t, h.api.Client, h.stored(), "node-c")
	}, existing)
	fresh.waitState(fsm.StateRunning)

	named := func(h *harness) func() bool {
		return func() bool { return slices.Equal(h.ctrl.Status().UnavailableNodes, []string{"node-c"}) }
	}
	long.eventually("node-c named by the long-running replica", named(long))
	fresh.eventually("node-c named by the fresh replica", named(fresh))
	want, got := status.Conditions(long.ctrl.Status()), status.Conditions(fresh.ctrl.Status())
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("fresh replica reports\n%+v\nlong-running one\n%+v", got, want)
	}
	if want[0].Reason != status.ReasonPodsUnavailable || want[1].Status != "False" || want[2].Status != "False" {
		t.Fatalf("conditions %+v, want Available PodsUnavailable, not Progressing, not Degraded", want)
	}
}

// Issue 18, defect 4: holding on an invalid config is reported as holding,
// with what is deployed, not as "disabled by insights-config".
func TestHoldingReportsWhatIsDeployed(t *testing.T) {
	existing := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.DaemonSetName},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}}
	h := start(t, configMap("dataReporting: [not, a, mapping"), existing)
	h.signalVersion() // handled after the start-up re-assert
	s := h.ctrl.Status()
	if !s.Holding || !s.Present || s.State != fsm.StateDisabled {
		t.Fatalf("snapshot holding %v, present %v, state %s; want holding a present DaemonSet", s.Holding, s.Present, s.State)
	}
	conds := status.Conditions(s)
	for i, want := range []string{"True Holding", "False Holding", "True InvalidConfig"} {
		if got := string(conds[i].Status) + " " + conds[i].Reason; got != want {
			t.Errorf("%s is %s %q, want %s", conds[i].Type, got, conds[i].Message, want)
		}
	}

	h.setConfig(enabledConfig)
	h.eventually("holding to end", func() bool { return !h.ctrl.Status().Holding })
}
