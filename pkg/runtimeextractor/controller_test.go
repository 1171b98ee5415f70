package runtimeextractor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

func TestStartupEnabledDeploysAndRuns(t *testing.T) {
	h := start(t)
	ds := h.waitStored("the DaemonSet to be created", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	if ds.Labels[resources.LabelManagedBy] != resources.ManagedByValue || ds.Annotations[resources.VersionAnnotation] != "4.21.0" {
		t.Fatalf("created DaemonSet has labels %v annotations %v", ds.Labels, ds.Annotations)
	}
	h.waitState(fsm.StateDeploying)
	h.rollOut()
	h.waitState(fsm.StateRunning)
}

func TestStartupWithExistingDesiredDaemonSetWritesNothing(t *testing.T) {
	first := start(t)
	first.waitStored("creation", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	first.rollOut()
	first.waitState(fsm.StateRunning)
	existing := first.stored()
	first.stop()

	// A restarted controller adopts the rolled-out DaemonSet with one update
	// that the server finds unchanged: nothing stored, no pod rolls.
	h := start(t, existing)
	h.waitState(fsm.StateRunning)
	requests := 0
	for _, a := range h.api.Client.Actions() {
		if a.GetResource().Resource == "daemonsets" && (a.GetVerb() == "update" || a.GetVerb() == "delete") {
			requests++ // (the one create staged the existing object)
		}
	}
	adopted := h.stored()
	if requests > 1 || adopted.Generation != existing.Generation || adopted.Status.ObservedGeneration != existing.Generation {
		t.Fatalf("restart sent %d write requests and left generation %d (was %d); want at most one request and no change", requests, adopted.Generation, existing.Generation)
	}
}

func TestDisableDeletesAndReenableRestores(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	h.setConfig(disabledConfig)
	h.waitState(fsm.StateDisabled)
	if ds := h.stored(); ds != nil {
		t.Fatalf("DaemonSet still present after disable")
	}

	h.setConfig(enabledConfig)
	h.waitStored("the DaemonSet to come back", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	h.rollOut()
	h.waitState(fsm.StateRunning)
}

func TestStartupDisabledDeletesLeftover(t *testing.T) {
	h := start(t, configMap(disabledConfig), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: resources.Namespace, Name: resources.DaemonSetName},
	})
	h.waitStored("the leftover DaemonSet to be deleted", func(ds *appsv1.DaemonSet) bool { return ds == nil })
	h.waitState(fsm.StateDisabled)
}

func TestDeletedWhileRunningIsRestored(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	old := h.stored()

	if err := h.api.Client.AppsV1().DaemonSets(resources.Namespace).Delete(context.Background(), resources.DaemonSetName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitStored("the DaemonSet to be recreated", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != old.UID })
	h.waitState(fsm.StateDrifted)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	created := h.changes.with(ReasonCreated)
	last := created[len(created)-1]
	if last.object == nil || last.object.Kind != "DaemonSet" || last.object.UID == old.UID || !strings.Contains(last.text, "deleted by someone else") {
		t.Fatalf("the recreate was recorded as %+v, want a Created Event on the new DaemonSet saying it was deleted by someone else", last)
	}
	if n := len(h.changes.with(ReasonUpdated)); n != 0 {
		t.Fatalf("a recreate also recorded %d Updated Events", n)
	}
}

func TestImageChangedWhileRunningIsRestored(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	ds := h.stored().DeepCopy()
	want := ds.Spec.Template.Spec.Containers[0].Image
	ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	if _, err := h.api.Client.AppsV1().DaemonSets(resources.Namespace).Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitStored("the image to be restored", func(ds *appsv1.DaemonSet) bool {
		return ds.Spec.Template.Spec.Containers[0].Image == want
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)
	updated := h.changes.with(ReasonUpdated)
	if len(updated) != 1 || updated[0].object == nil || updated[0].object.Kind != "DaemonSet" || !strings.Contains(updated[0].text, "spec changed") {
		t.Fatalf("the repair was recorded as %+v, want one Updated Event on the DaemonSet naming the spec change", updated)
	}
}

func TestVersionChangeIsRecordedWithBothVersions(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)
	h.version.set("4.22.0")
	h.eventually("an Updated Event naming the versions", func() bool {
		return h.changes.mentions(ReasonUpdated, "version moved from 4.21.0 to 4.22.0")
	})
}

func TestVersionChangeUpgrades(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	seen := recordTransitions(h.ctrl)
	h.version.set("4.22.0")
	h.waitStored("the new version annotation", func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == "4.22.0"
	})
	// The version alone moves no pod: the upgrade completes with the rollout
	// that is already done.
	h.waitState(fsm.StateRunning)
	if !seen.any(func(t fsm.Transition) bool { return t.To == fsm.StateUpgrading }) {
		t.Fatalf("no Upgrading: %v", seen.list())
	}
	if h.stored().Generation != 1 {
		t.Fatalf("a version change rolled the pods: generation %d", h.stored().Generation)
	}
}

func TestSeedUpdateChannel(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	// The seed's operator signals on updateCh; the controller reads the version.
	h.version.mu.Lock()
	h.version.v = "4.23.0"
	h.version.mu.Unlock()
	h.signalVersion()
	h.waitStored("the version from updateCh", func(ds *appsv1.DaemonSet) bool {
		return ds.Annotations[resources.VersionAnnotation] == "4.23.0"
	})
	h.rollOut()
	h.waitState(fsm.StateRunning)

	// A notification without a version change writes nothing.
	h.api.Client.ClearActions()
	h.signalVersion()
	for _, a := range h.api.Client.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			t.Fatalf("an unchanged version wrote: %v", a)
		}
	}
}

func TestApplyFailuresBackOffThenConverge(t *testing.T) {
	failures := 3
	api := func(h *harness) {
		h.api.Client.PrependReactor("create", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			if failures > 0 {
				failures--
				return true, nil, apierrors.NewForbidden(appsv1.Resource("daemonsets"), resources.DaemonSetName, errors.New("injected"))
			}
			return false, nil, nil
		})
	}
	h := startWith(t, api)
	h.waitStored("creation after three failures", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	h.rollOut()
	h.waitState(fsm.StateRunning)

	waits := h.limiter.waits.list()
	if len(waits) != 3 {
		t.Fatalf("got %d retries (%v), want 3", len(waits), waits)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("backoff did not grow: %v", waits)
		}
	}
	// The same failure three times is one Warning, on the Namespace while
	// there is no DaemonSet to put it on.
	warnings := h.changes.with(ReasonApplyFailed)
	if len(warnings) != 1 || warnings[0].eventType != corev1.EventTypeWarning || warnings[0].object.Kind != "Namespace" || !strings.Contains(warnings[0].text, "injected") {
		t.Fatalf("got %+v, want one Warning naming the failure", warnings)
	}
}

func TestMalformedConfigKeepsDaemonSet(t *testing.T) {
	h := start(t)
	h.rollOut()
	h.waitState(fsm.StateRunning)

	h.setConfig("dataReporting: [not, a, mapping")
	h.eventually("an InvalidConfig warning", func() bool { return h.eventCount("InvalidConfig") == 1 })
	if h.stored() == nil || h.ctrl.State() != fsm.StateRunning {
		t.Fatalf("malformed config changed things: state %s", h.ctrl.State())
	}
}

func TestCancelStopsRun(t *testing.T) {
	h := start(t)
	h.waitState(fsm.StateDeploying)
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(testwait.Patience):
		t.Fatalf("Run did not return within %s of cancel", testwait.Patience)
	}
}

// TestOwnWriteSeenBeforeBookkeepingIsNotDrift: the watch event of the
// controller's own write can reach the informer before the manager recorded the
// write; the controller re-checks such observations when it drains them.
func TestOwnWriteSeenBeforeBookkeepingIsNotDrift(t *testing.T) {
	h, ds := startStoppedWhenRunning(t)
	ctx := context.Background()
	var visited []fsm.State
	h.ctrl.machine.OnTransition(func(tr fsm.Transition) { visited = append(visited, tr.To) })

	h.ctrl.informer.drift(observation{Kind: DriftModified, UID: ds.UID, Generation: ds.Generation})
	h.ctrl.step(ctx, core.Input{Kind: core.InputDrift})
	if len(visited) != 0 || len(h.changes.with(ReasonUpdated)) != 0 {
		t.Fatalf("own write treated as drift: visited %v, events %+v", visited, h.changes.with(ReasonUpdated))
	}

	// Someone else's write: Drifted, the (no-op) apply, the rollout check, Running.
	h.ctrl.informer.drift(observation{Kind: DriftModified, UID: ds.UID, Generation: ds.Generation + 1})
	h.ctrl.step(ctx, core.Input{Kind: core.InputDrift})
	if len(visited) == 0 || visited[0] != fsm.StateDrifted {
		t.Fatalf("someone else's write not treated as drift: visited %v", visited)
	}
}

// New says what is missing, so that a host that fails its start on it
// (the Insights Operator's Operator.Run) is not left with a controller that
// never runs and a status source that is never ready.
func TestNewSaysWhatIsMissing(t *testing.T) {
	notifier := ConfigFrom(nil, func() bool { return false })
	for _, c := range []struct {
		args Args
		want string
	}{
		{Args{ConfigNotifier: notifier}, "no Kubernetes client"},
		{Args{KubeClient: fake.NewClientset()}, "no ConfigNotifier"},
	} {
		if _, err := New(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
