package runtimeextractor

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// API cost, counted in requests: each behaviour below has a fixed price that
// must not regress silently.

// daemonSetRequests counts the recorded requests on the DaemonSet by verb
// (status updates, which play the DaemonSet controller, apart).
func daemonSetRequests(actions []clienttesting.Action) map[string]int {
	out := map[string]int{}
	for _, a := range actions {
		if a.GetResource().Resource != "daemonsets" || a.GetSubresource() != "" {
			continue
		}
		out[a.GetVerb()]++
	}
	return out
}

// deleteAndCountRepair deletes the DaemonSet old, waits until it is recreated
// and Running again, and returns the DaemonSet requests recorded since the
// last ClearActions, the test's delete left out.
func (h *harness) deleteAndCountRepair(old *appsv1.DaemonSet) map[string]int {
	h.t.Helper()
	if err := h.api.Client.AppsV1().DaemonSets(resources.Namespace).Delete(context.Background(), resources.DaemonSetName, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.waitStored("the DaemonSet to be recreated", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
	h.rollOut()
	h.waitState(fsm.StateRunning)
	got := daemonSetRequests(h.api.Client.Actions())
	got["delete"]-- // the test's
	return got
}

func writes(n map[string]int) int { return n["create"] + n["update"] + n["patch"] + n["delete"] }

// A deleted DaemonSet is recreated with exactly one write and no read, and
// one Event records it.
func TestDeleteRepairCostsOneWrite(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	old := h.stored()
	events := len(h.changes.with(""))

	h.api.Client.ClearActions()
	got := h.deleteAndCountRepair(old)
	if got["create"] != 1 || writes(got) != 1 || got["get"] != 0 {
		t.Fatalf("delete repair cost %v, want one create and no read", got)
	}
	if n := len(h.changes.with("")) - events; n != 1 {
		t.Fatalf("delete repair recorded %d Events, want 1: %+v", n, h.changes.with("")[events:])
	}
}

// The first apply creates once; a later re-assert of the same level writes
// nothing and reads nothing.
func TestFirstApplyCreatesOnce(t *testing.T) {
	h := start(t)
	h.setConfig(enabledConfig)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	h.signalVersion() // the host's notification: the level is re-asserted
	got := daemonSetRequests(h.api.Client.Actions())
	if got["create"] != 1 || writes(got) != 1 || got["get"] != 0 {
		t.Fatalf("first deploy cost %v, want one create and no read", got)
	}
}

// 200 config toggles as fast as the API takes them, ending enabled: the front
// door merges them into a few re-asserts, and the end state is right.
func TestConfigStormCoalesces(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	h.api.Client.ClearActions()

	for i := range 200 {
		if i%2 == 0 {
			h.setConfig(disabledConfig)
		} else {
			h.setConfig(enabledConfig)
		}
	}
	h.waitStored("the DaemonSet after the storm", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	h.eventually("the storm to be acted on", func() bool { return h.ctrl.State() != fsm.StateDeleting })
	got := daemonSetRequests(h.api.Client.Actions())
	if writes(got) > 10 {
		t.Fatalf("200 toggles cost %d DaemonSet writes (%v), want at most 10", writes(got), got)
	}
	t.Logf("200 toggles: %d DaemonSet writes (%v)", writes(got), got)
}

// A delete that orphans the pods first marks the DaemonSet (deletionTimestamp,
// a finalizer, a new generation), then removes it: one repair, one create,
// and no write to the object on its way out.
func TestOrphaningDeleteIsRepairedWithOneCreate(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	old := h.stored().DeepCopy()
	h.api.Client.ClearActions()

	marked := old.DeepCopy()
	now := metav1.Now()
	marked.DeletionTimestamp = &now
	marked.Finalizers = []string{metav1.FinalizerOrphanDependents}
	if _, err := h.api.Update(marked); err != nil {
		t.Fatal(err)
	}
	h.eventually("the marked DaemonSet in the cache", func() bool {
		ds, ok := h.ctrl.informer.current()
		return ok && ds.DeletionTimestamp != nil
	})
	got := h.deleteAndCountRepair(old)
	if got["create"] != 1 || writes(got) != 1 {
		t.Fatalf("an orphaning delete cost %v, want one create", got)
	}
}
