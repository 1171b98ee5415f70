package runtimeextractor

import (
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// foreignSelectorDaemonSet is the DaemonSet someone else puts in place of the
// controller's: the desired one with another selector and labels.
func foreignSelectorDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.21.0"})
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]string{"app": "someone-else"}
	ds.Labels = theirs
	ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: theirs}
	ds.Spec.Template.Labels = theirs
	return ds
}

func ourSelector(ds *appsv1.DaemonSet) bool {
	return ds != nil && ds.Spec.Selector != nil && ds.Spec.Selector.MatchLabels[resources.LabelName] == resources.NameValue
}

// Defect 3 of issue 26, at start: the DaemonSet someone else created with
// another selector cannot be adopted (spec.selector is immutable), so the
// controller failed to apply it for good. It is replaced, and the Created
// Event names the object replaced and why.
func TestStartReplacesADaemonSetWithAnotherSelector(t *testing.T) {
	// Read theirs before the controller starts: once it runs, it may have
	// replaced theirs already.
	var theirs *appsv1.DaemonSet
	h := startWith(t, func(h *harness) { theirs = h.stored() }, foreignSelectorDaemonSet(t))
	ours := h.waitStored("the DaemonSet ours", func(ds *appsv1.DaemonSet) bool { return ourSelector(ds) })
	if ours.UID == theirs.UID {
		t.Fatalf("the foreign object %s was kept", theirs.UID)
	}
	h.rollOut()
	h.waitState(fsm.StateRunning)
	created := h.changes.with(ReasonCreated)
	if len(created) != 1 || !strings.Contains(created[0].text, "replaced "+string(theirs.UID)) ||
		!strings.Contains(created[0].text, "app=someone-else") || !strings.Contains(created[0].text, "immutable") {
		t.Errorf("Created Events %v, want one naming %s, its selector and why", created, theirs.UID)
	}
	if n := h.eventCount(ReasonApplyFailed); n != 0 {
		t.Errorf("%d ApplyFailed Events, want none", n)
	}
}

// The same replacement while the controller runs: someone deletes the
// DaemonSet and creates theirs just before the controller's repair creates
// its own (a GitOps prune and create). The repair's create meets theirs, a
// fresh read shows it, and it is replaced.
func TestRunningControllerReplacesADaemonSetWithAnotherSelector(t *testing.T) {
	var (
		mu     sync.Mutex
		armed  bool
		theirs *appsv1.DaemonSet
	)
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("create", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if !armed {
				return false, nil, nil
			}
			armed = false
			var err error
			if theirs, err = h.api.Create(foreignSelectorDaemonSet(t)); err != nil {
				return true, nil, err
			}
			return false, nil, nil // the controller's create runs into theirs
		})
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := h.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName); err != nil {
		t.Fatal(err)
	}
	ours := h.waitStored("the DaemonSet ours again", func(ds *appsv1.DaemonSet) bool {
		mu.Lock()
		defer mu.Unlock()
		return theirs != nil && ourSelector(ds) && ds.UID != theirs.UID
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	if cur := h.stored(); cur.UID != ours.UID {
		t.Errorf("the DaemonSet was written again after the replace: %s, then %s", ours.UID, cur.UID)
	}
	if !h.changes.mentions(ReasonCreated, "replaced "+string(theirs.UID)) {
		t.Errorf("no Created Event names the replaced %s: %v", theirs.UID, h.changes.with(ReasonCreated))
	}
	if n := h.eventCount(ReasonApplyFailed); n != 0 {
		t.Errorf("%d ApplyFailed Events, want none", n)
	}
}
