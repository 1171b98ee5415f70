package resources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestManager(fc *fakeCluster, opts ...ManagerOption) *Manager {
	return NewManager(fc.client, fc.lister, fc.recorder, defaultDesired(), opts...)
}

// apply runs m.Apply and fails the test on error.
func apply(t *testing.T, m *Manager, d Desired) Result {
	t.Helper()
	res, err := m.Apply(context.Background(), d)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func expectRequests(t *testing.T, fc *fakeCluster, step string, reads, writes int) {
	t.Helper()
	got := fc.requests()
	t.Logf("%s: %d reads, %d writes %v", step, got.Reads, got.Writes, got.Verbs)
	if got.Reads != reads || got.Writes != writes {
		t.Errorf("%s: %d reads, %d writes (%v), want %d reads, %d writes", step, got.Reads, got.Writes, got.Verbs, reads, writes)
	}
	fc.client.ClearActions()
}

func expectEvents(t *testing.T, fc *fakeCluster, step string, want ...string) {
	t.Helper()
	if got := fc.reasons(); !slices.Equal(got, want) {
		t.Errorf("%s: events %v, want %v", step, got, want)
	}
}

// newManagedCluster returns a fake cluster and a manager of it.
func newManagedCluster(t *testing.T, opts ...ManagerOption) (*fakeCluster, *Manager) {
	t.Helper()
	fc := newFakeCluster(t)
	return fc, newTestManager(fc, opts...)
}

// applied returns a manager that applied the default DaemonSet, and its
// cluster with the cache showing that DaemonSet.
func applied(t *testing.T, opts ...ManagerOption) (*fakeCluster, *Manager) {
	t.Helper()
	fc, m := newManagedCluster(t, opts...)
	apply(t, m, defaultDesired())
	fc.sync()
	return fc, m
}

// injectedForbidden and injectedConflict are the API errors tests inject.
func injectedForbidden() error {
	return apierrors.NewForbidden(appsv1.Resource("daemonsets"), DaemonSetName, errors.New("injected"))
}

func injectedConflict() error {
	return apierrors.NewConflict(appsv1.Resource("daemonsets"), DaemonSetName, errors.New("injected"))
}

// writtenGeneration is the generation of the object m last wrote or adopted
// (0 for none), read under its lock as the informer's goroutine reads it.
func writtenGeneration(m *Manager) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.generation
}

// summary prints a Result without its object.
func summary(r Result) string {
	return fmt.Sprintf("{changed:%v generation:%d}", r.Changed, r.Generation)
}

func image(ds *appsv1.DaemonSet, container string) string {
	return findContainer(&ds.Spec.Template.Spec, container).Image
}

// TestApplyLifecycle walks create, no-op, drift correction and a
// desired-state change, counting the API requests of each step: these
// counts are the baseline of the performance goal.
func TestApplyLifecycle(t *testing.T) {
	fc, m := newManagedCluster(t)

	// First apply: the cache shows nothing, so create without a GET.
	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "first apply", 0, 1)
	expectEvents(t, fc, "first apply", EventReasonCreated)
	if !res.Changed || res.Generation != 1 || fc.stored() == nil {
		t.Fatalf("first apply: result %s, stored %v; want a created object at generation 1", summary(res), fc.stored() != nil)
	}
	if g := writtenGeneration(m); g != 1 {
		t.Errorf("written generation = %d, want 1", g)
	}
	fc.sync()

	// Same desired state: nothing read from the API server, nothing written.
	res = apply(t, m, defaultDesired())
	expectRequests(t, fc, "no-op apply", 0, 0)
	expectEvents(t, fc, "no-op apply", EventReasonCreated)
	if res.Changed || res.Generation != 1 {
		t.Errorf("no-op apply: result %s, want unchanged at generation 1", summary(res))
	}

	// Someone changes an image: one update restores it.
	fc.edit(func(ds *appsv1.DaemonSet) {
		findContainer(&ds.Spec.Template.Spec, ContainerExporter).Image = "quay.io/evil/exporter:latest"
	})
	res = apply(t, m, defaultDesired())
	expectRequests(t, fc, "drift-correcting apply", 0, 1)
	expectEvents(t, fc, "drift-correcting apply", EventReasonCreated, EventReasonUpdated)
	if got := image(fc.stored(), ContainerExporter); got != DefaultExporterImage {
		t.Errorf("drift-correcting apply: exporter image %q, want %q", got, DefaultExporterImage)
	}
	if g := writtenGeneration(m); !res.Changed || res.Generation != 3 || g != 3 {
		t.Errorf("drift-correcting apply: result %s, last written %d; want changed at generation 3", summary(res), g)
	}
	fc.sync()

	// A new version with new images: one update.
	next := defaultDesired()
	next.Version = "4.22.0"
	next.Images.Extractor = "quay.io/openshift/origin-insights-runtime-extractor:4.22"
	res = apply(t, m, next)
	expectRequests(t, fc, "upgrade apply", 0, 1)
	expectEvents(t, fc, "upgrade apply", EventReasonCreated, EventReasonUpdated, EventReasonUpdated)
	stored := fc.stored()
	if stored.Annotations[VersionAnnotation] != "4.22.0" || stored.Spec.Template.Annotations[VersionAnnotation] != "" {
		t.Errorf("upgrade apply: version annotations %q on the DaemonSet, %q on the pods (want none)", stored.Annotations[VersionAnnotation], stored.Spec.Template.Annotations[VersionAnnotation])
	}
	if image(stored, ContainerExtractor) != next.Images.Extractor || !res.Changed || res.Generation != 4 {
		t.Errorf("upgrade apply: extractor %q, result %s", image(stored, ContainerExtractor), summary(res))
	}
	fc.sync()

	// And the upgrade applied again is a no-op.
	apply(t, m, next)
	expectRequests(t, fc, "no-op apply after upgrade", 0, 0)
}

func TestApplyRestoresRemovedLabel(t *testing.T) {
	fc, m := applied(t)
	fc.client.ClearActions()

	// Metadata edits do not move the generation, but are drift all the same.
	fc.edit(func(ds *appsv1.DaemonSet) { delete(ds.Labels, LabelManagedBy) })
	if fc.stored().Generation != 1 {
		t.Fatalf("label edit moved the generation")
	}
	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "label restore", 0, 1)
	if fc.stored().Labels[LabelManagedBy] != ManagedByValue || !res.Changed {
		t.Errorf("label not restored: labels %v, result %s", fc.stored().Labels, summary(res))
	}
}

func TestApplyAfterRestartAdoptsMatchingObject(t *testing.T) {
	fc, _ := applied(t)
	fc.client.ClearActions()
	before := fc.stored()

	// No memory of the write: one update, which the server finds unchanged
	// (no new resourceVersion, no generation, no pod rolls).
	restarted := newTestManager(fc)
	res := apply(t, restarted, defaultDesired())
	expectRequests(t, fc, "apply after restart", 0, 1)
	if g := writtenGeneration(restarted); res.Changed || res.Generation != 1 || g != 1 || fc.stored().ResourceVersion != before.ResourceVersion {
		t.Errorf("result %s, last written %d, resourceVersion %s (was %s); want the existing object adopted unchanged at generation 1",
			summary(res), g, fc.stored().ResourceVersion, before.ResourceVersion)
	}
	apply(t, restarted, defaultDesired())
	expectRequests(t, fc, "second apply after restart", 0, 0)
	expectEvents(t, fc, "adoption", EventReasonCreated, EventReasonUpdated) // library-go logs the update it sent
}

func TestApplyAfterRestartRewritesEditedObject(t *testing.T) {
	fc, _ := applied(t)
	// Edited while the controller was down; the spec-hash annotation stays.
	fc.edit(func(ds *appsv1.DaemonSet) {
		findContainer(&ds.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/evil/extractor:latest"
	})

	restarted := newTestManager(fc)
	res := apply(t, restarted, defaultDesired())
	expectRequests(t, fc, "apply after restart", 0, 1)
	if image(fc.stored(), ContainerExtractor) != DefaultExtractorImage || !res.Changed {
		t.Errorf("edited object not restored: result %s", summary(res))
	}
	if g := writtenGeneration(restarted); g != fc.stored().Generation {
		t.Errorf("written generation = %d, want %d", g, fc.stored().Generation)
	}
}

func TestApplyRecreatedObjectIsNotTrustedByGeneration(t *testing.T) {
	fc, m := applied(t)

	// Someone deletes it and creates their own at generation 1, copying the
	// metadata: same generation as the manager's write, different object.
	own := fc.stored().DeepCopy()
	findContainer(&own.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/evil/extractor:latest"
	fc.replaceStored(own)
	fc.sync()
	fc.client.ClearActions()

	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply over a recreated object", 0, 1)
	if image(fc.stored(), ContainerExtractor) != DefaultExtractorImage || !res.Changed {
		t.Errorf("recreated object not corrected: result %s", summary(res))
	}
}

// Expectations: until the cache shows an own create or spec update, an apply
// compares against the object that write returned: no second create, no
// read, no update bound to conflict.
func TestApplyWithStaleCacheTrustsItsOwnWrite(t *testing.T) {
	fc, m := newManagedCluster(t)
	apply(t, m, defaultDesired())
	fc.client.ClearActions()

	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply before the cache saw the create", 0, 0)
	if res.Changed || res.Generation != 1 {
		t.Errorf("result %s, want unchanged at generation 1", summary(res))
	}
	fc.sync()

	// The cache holds an older generation than the manager's last write.
	fc.edit(func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 7 })
	apply(t, m, defaultDesired()) // generation 3 written, cache at 2
	fc.client.ClearActions()
	res = apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply with the cache one write behind", 0, 0)
	if res.Changed || res.Generation != 3 {
		t.Errorf("result %s, want unchanged at generation 3", summary(res))
	}
	if _, ok := m.Expecting(); !ok {
		t.Error("the write the cache has not shown is no longer expected")
	}
	fc.sync()
	apply(t, m, defaultDesired())
	if _, ok := m.Expecting(); ok {
		t.Error("still expecting a write the cache shows")
	}
	expectEvents(t, fc, "stale cache", EventReasonCreated, EventReasonUpdated)
}

// An expected write the cache never shows is trusted only for
// ExpectationTimeout; then the server is read again.
func TestExpectationTimesOut(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	fc, m := newManagedCluster(t, WithClock(clk))
	apply(t, m, defaultDesired())
	fc.client.ClearActions()

	if _, ok := m.Expecting(); !ok {
		t.Fatal("not expecting the create")
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	res := apply(t, m, defaultDesired())
	// The create collides, a live GET shows the manager's own object.
	expectRequests(t, fc, "apply after the expectation timed out", 1, 1)
	if res.Changed {
		t.Errorf("result %s, want unchanged", summary(res))
	}
}

// The informer saw our new object deleted before it showed it: the deletion
// ends the expectation and the next apply creates again.
func TestObservedDeletionEndsTheExpectation(t *testing.T) {
	fc, m := newManagedCluster(t)
	res := apply(t, m, defaultDesired())
	if err := fc.client.AppsV1().DaemonSets(Namespace).Delete(context.Background(), DaemonSetName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fc.client.ClearActions()
	m.ObservedDeletion(res.Object.UID)
	res = apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply after the deletion", 0, 1)
	if !res.Created {
		t.Errorf("result %s, want created", summary(res))
	}
}

// drifted returns a manager whose DaemonSet someone changed since its apply
// (minReadySeconds 7), the cache showing the change.
func drifted(t *testing.T) (*fakeCluster, *Manager) {
	t.Helper()
	fc, m := applied(t)
	fc.edit(func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = 7 })
	return fc, m
}

// driftedWithOneConflict returns a manager whose next apply restores a spec
// someone changed and meets one Conflict first; beforeConflict runs when it
// does (the write that won).
func driftedWithOneConflict(t *testing.T, beforeConflict func(*fakeCluster)) (*fakeCluster, *Manager) {
	fc, m := drifted(t)
	conflicts := 1
	fc.client.PrependReactor("update", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		beforeConflict(fc)
		return true, nil, injectedConflict()
	})
	return fc, m
}

// The usual conflict: the DaemonSet controller updated the status between the
// cache read and the write. The retry waits for the cache to show that
// update (as the informer soon does) and reads nothing from the server.
func TestConflictRetryWaitsForTheCache(t *testing.T) {
	fc, m := driftedWithOneConflict(t, func(fc *fakeCluster) {
		ds := fc.stored().DeepCopy()
		ds.Status.NumberAvailable++
		if _, err := fc.srv.UpdateStatus(ds); err != nil {
			t.Errorf("status write: %v", err)
		}
		fc.sync() // the informer delivers it
	})
	res := apply(t, m, defaultDesired())
	got := fc.requests()
	if got.Reads != 0 || !res.Changed || fc.stored().Spec.MinReadySeconds != 0 {
		t.Errorf("conflict retry: %d reads (%v), result %s; want the spec restored without a read", got.Reads, got.Verbs, summary(res))
	}
}

// A conflict the cache never explains: after cacheCatchUp, one live read.
func TestApplyRetriesConflict(t *testing.T) {
	fc, m := driftedWithOneConflict(t, func(*fakeCluster) {})
	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply with one conflict", 1, 2)
	if !res.Changed || fc.stored().Spec.MinReadySeconds != 0 {
		t.Errorf("conflict not retried to success: result %s", summary(res))
	}
	// No warning for the lost race, one event for the update.
	expectEvents(t, fc, "apply with one conflict", EventReasonCreated, EventReasonUpdated)
}

func TestApplyGivesUpAfterEndlessConflicts(t *testing.T) {
	fc, m := drifted(t)

	fc.failAll("update", injectedConflict())
	_, err := m.Apply(context.Background(), defaultDesired())
	if err == nil {
		t.Fatal("Apply succeeded against endless conflicts")
	}
	if !apierrors.IsConflict(err) {
		t.Errorf("error %v does not wrap the Conflict", err)
	}
	steps := applyAttempts
	expectRequests(t, fc, "endless conflicts", steps-1, steps)
	expectEvents(t, fc, "endless conflicts", EventReasonCreated)
	if g := writtenGeneration(m); g != 1 {
		t.Errorf("written generation = %d after failed writes, want 1", g)
	}
}

func TestApplyStopsOnOtherErrors(t *testing.T) {
	fc, m := newManagedCluster(t)
	fc.failAll("create", injectedForbidden())
	_, err := m.Apply(context.Background(), defaultDesired())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Apply error = %v, want the wrapped Forbidden", err)
	}
	expectRequests(t, fc, "forbidden create", 0, 1)
	expectEvents(t, fc, "forbidden create")
}

func TestApplyRefusesInvalidImage(t *testing.T) {
	fc, m := newManagedCluster(t)
	d := defaultDesired()
	d.Images.KubeRBACProxy = "kube-rbac-proxy"
	if _, err := m.Apply(context.Background(), d); err == nil {
		t.Fatal("Apply accepted an image that is not fully qualified")
	}
	expectRequests(t, fc, "invalid image", 0, 0)
	if fc.stored() != nil {
		t.Error("an invalid image reached the cluster")
	}
}

func TestApplyStampsFieldManager(t *testing.T) {
	fc, m := newManagedCluster(t)
	apply(t, m, defaultDesired())
	create := fc.client.Actions()[0].(clienttesting.CreateActionImpl)
	if create.CreateOptions.FieldManager != FieldManager {
		t.Errorf("create field manager %q, want %q", create.CreateOptions.FieldManager, FieldManager)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	fc, m := applied(t)
	fc.client.ClearActions()

	want := fc.stored().UID
	deleted, err := m.Delete(ctx)
	if err != nil || deleted != want {
		t.Fatalf("Delete = %q, %v; want %q, nil", deleted, err, want)
	}
	expectRequests(t, fc, "delete", 0, 1)
	expectEvents(t, fc, "delete", EventReasonCreated, EventReasonDeleted)
	if g := writtenGeneration(m); fc.stored() != nil || g != 0 {
		t.Errorf("after delete: stored %v, last written %d", fc.stored() != nil, g)
	}

	// The cache still shows it: the DELETE finds nothing, which is success.
	deleted, err = m.Delete(ctx)
	if err != nil || deleted != "" {
		t.Errorf("Delete of a missing object = %q, %v; want none, nil", deleted, err)
	}
	expectRequests(t, fc, "delete with stale cache", 0, 1)

	// The cache shows nothing: no request at all.
	fc.sync()
	deleted, err = m.Delete(ctx)
	if err != nil || deleted != "" {
		t.Errorf("Delete when absent = %q, %v; want none, nil", deleted, err)
	}
	expectRequests(t, fc, "delete when absent", 0, 0)
	expectEvents(t, fc, "deletes of a missing object", EventReasonCreated, EventReasonDeleted)
}

func TestDeleteRightAfterCreate(t *testing.T) {
	fc, m := newManagedCluster(t)
	apply(t, m, defaultDesired())
	fc.client.ClearActions()

	// The cache has not seen the create, but the manager knows it wrote one.
	deleted, err := m.Delete(context.Background())
	if err != nil || deleted == "" || fc.stored() != nil {
		t.Fatalf("Delete = %v, %v (stored %v); want the fresh object deleted", deleted, err, fc.stored() != nil)
	}
	expectRequests(t, fc, "delete right after create", 0, 1)
}

func TestDeleteError(t *testing.T) {
	fc, m := applied(t)
	fc.failAll("delete", injectedForbidden())
	deleted, err := m.Delete(context.Background())
	if !apierrors.IsForbidden(err) || deleted != "" {
		t.Fatalf("Delete = %v, %v; want false and the wrapped Forbidden", deleted, err)
	}
	expectEvents(t, fc, "failed delete", EventReasonCreated)
	if writtenGeneration(m) != 1 {
		t.Errorf("a failed delete forgot the written generation")
	}
}

func TestCurrentAndExistsReadTheCache(t *testing.T) {
	ctx := context.Background()
	fc, m := newManagedCluster(t)
	if _, ok := m.Current(); ok || m.ResourcesExists(ctx) {
		t.Fatal("empty cache reported a DaemonSet")
	}
	apply(t, m, defaultDesired())
	if m.ResourcesExists(ctx) {
		t.Error("ResourcesExists answered from the API server, not the cache")
	}
	fc.sync()
	fc.client.ClearActions()
	ds, ok := m.Current()
	if !ok || !m.ResourcesExists(ctx) || ds.Generation != 1 {
		t.Fatalf("Current found=%v after sync, want the cached object at generation 1", ok)
	}
	ds.Labels["mutated"] = "yes"
	if again, _ := m.Current(); again.Labels["mutated"] != "" {
		t.Error("Current returned the cache's own object")
	}
	expectRequests(t, fc, "Current/ResourcesExists", 0, 0)
}

func TestResourceManagerMethods(t *testing.T) {
	ctx := context.Background()
	fc, m := newManagedCluster(t)
	modern := &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}
	if err := m.ApplyRuntimeExtractorResources(ctx, modern); err != nil {
		t.Fatalf("ApplyRuntimeExtractorResources: %v", err)
	}
	args := findContainer(&fc.stored().Spec.Template.Spec, ContainerKubeRBACProxy).Args
	if !slices.Contains(args, "--tls-min-version=VersionTLS13") {
		t.Errorf("TLS profile not applied: args %v", args)
	}
	fc.sync()
	if !m.ResourcesExists(ctx) {
		t.Error("ResourcesExists = false after apply")
	}
	if err := m.DeleteRuntimeExtractorResources(ctx); err != nil || fc.stored() != nil {
		t.Errorf("DeleteRuntimeExtractorResources: %v (stored %v)", err, fc.stored() != nil)
	}
}

// The written generation is read by the informer goroutine (IsOwnWrite) while
// the executor applies; run with -race.
func TestWrittenGenerationConcurrentReads(t *testing.T) {
	fc, m := newManagedCluster(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = writtenGeneration(m)
				_ = m.IsOwnWrite("uid", 1)
			}
		}
	})
	for i := range 5 {
		d := defaultDesired()
		d.Scheduling.PriorityClassName = "class-" + string(rune('a'+i)) // a spec change: a new generation
		apply(t, m, d)
		fc.sync()
	}
	close(stop)
	wg.Wait()
	if g := writtenGeneration(m); g != 5 {
		t.Errorf("written generation = %d, want 5", g)
	}
}

// Someone deleted the DaemonSet and the cache has not seen it yet: the update
// gets NotFound, and a live read shows it gone. A create now would undo that
// deletion, a repair the caller's repair gate decides on once the deletion
// reaches it: the apply writes nothing more, and says so.
func TestApplyAfterUnseenDeleteIsLeftToTheGate(t *testing.T) {
	fc, m := drifted(t)
	fc.sync()
	fc.deleteStored()
	fc.client.ClearActions()

	_, err := m.Apply(context.Background(), defaultDesired())
	if !errors.Is(err, ErrLostToAnotherWriter) {
		t.Fatalf("Apply error = %v, want ErrLostToAnotherWriter", err)
	}
	expectRequests(t, fc, "apply after an unseen delete", 1, 1) // update (NotFound), GET
	if fc.stored() != nil {
		t.Error("the apply created the DaemonSet someone deleted")
	}
}

// A host may learn the new version before its image variables change: the
// version alone moves only the DaemonSet's annotation, so no pod rolls.
func TestVersionAloneRollsNoPods(t *testing.T) {
	fc, m := newManagedCluster(t)
	first := apply(t, m, defaultDesired())
	fc.sync()
	fc.client.ClearActions()

	next := defaultDesired()
	next.Version = "4.99.0"
	res := apply(t, m, next)
	expectRequests(t, fc, "version-only apply", 0, 1)
	if !res.Changed || res.Rolls || res.Generation != first.Generation {
		t.Fatalf("version-only apply: result %s (rolls %v), want a metadata write at generation %d", summary(res), res.Rolls, first.Generation)
	}
	if got := fc.stored().Annotations[VersionAnnotation]; got != "4.99.0" {
		t.Fatalf("version annotation %q, want 4.99.0", got)
	}
}

// Someone replaced the DaemonSet behind the cache: the UID precondition keeps
// the manager from deleting blindly, one live read names the object there, and
// the UID returned is the one really deleted.
func TestDeleteNamesWhatItDeleted(t *testing.T) {
	fc, m := applied(t)
	old := fc.stored()
	replacement := fc.replaceStored(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: DaemonSetName}})
	fc.client.ClearActions()

	deleted, err := m.Delete(context.Background())
	if err != nil || deleted != replacement.UID || deleted == old.UID {
		t.Fatalf("Delete = %q, %v; want the replacement %q (not %q)", deleted, err, replacement.UID, old.UID)
	}
	expectRequests(t, fc, "delete of a replaced object", 1, 2) // precondition conflict, GET, delete
	if fc.stored() != nil {
		t.Fatal("the replacement is still there")
	}
}

// A DaemonSet being deleted (orphaning its pods, say) is not written: the
// write would be lost with it, and its deletion is what the controller
// repairs next.
func TestApplyDoesNotWriteADaemonSetBeingDeleted(t *testing.T) {
	fc, m := newManagedCluster(t)
	apply(t, m, defaultDesired())
	fc.edit(func(ds *appsv1.DaemonSet) {
		now := metav1.Now()
		ds.DeletionTimestamp = &now
		ds.Finalizers = []string{metav1.FinalizerOrphanDependents}
		ds.Spec.MinReadySeconds = 7
	})
	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply to a DaemonSet being deleted", 0, 0)
	if res.Changed || res.Created {
		t.Errorf("result %s, want no write", summary(res))
	}
}

// TestRequiredIsBuiltOncePerDesired: the desired DaemonSet is reused while
// its inputs stay the same, and rebuilt when any of them changes, also
// through a pointer the caller changed in place.
func TestRequiredIsBuiltOncePerDesired(t *testing.T) {
	m := newTestManager(newFakeCluster(t))
	d := schedulingDesired()
	first, err := m.requiredFor(d)
	if err != nil {
		t.Fatal(err)
	}
	if first.Annotations[SpecHashAnnotation] == "" {
		t.Fatalf("the desired DaemonSet has no %s annotation: %v", SpecHashAnnotation, first.Annotations)
	}
	if again, _ := m.requiredFor(schedulingDesired()); again != first {
		t.Error("equal inputs built a new DaemonSet")
	}

	d.TLSProfile.Type = configv1.TLSProfileOldType // in place, behind the pointer
	changed, err := m.requiredFor(d)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Fatal("a TLS profile changed in place reused the old DaemonSet")
	}
	want, err := DesiredDaemonSet(d)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(changed.Spec, want.Spec) {
		t.Error("the rebuilt DaemonSet is not DesiredDaemonSet's")
	}
	if changed.Annotations[SpecHashAnnotation] == first.Annotations[SpecHashAnnotation] {
		t.Error("the spec hash did not change with the spec")
	}

	other := defaultDesired()
	other.Images.Extractor = "quay.io/example/extractor@sha256:" + strings.Repeat("e", 64)
	if got, _ := m.requiredFor(other); image(got, ContainerExtractor) != other.Images.Extractor {
		t.Errorf("extractor image %q, want %q", image(got, ContainerExtractor), other.Images.Extractor)
	}
}

// BenchmarkRequiredFor compares building the desired DaemonSet (and hashing
// its spec) with reusing it, the step a repair takes before its write.
func BenchmarkRequiredFor(b *testing.B) {
	d := schedulingDesired()
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			ds, err := DesiredDaemonSet(d)
			if err != nil {
				b.Fatal(err)
			}
			if err := resourceapply.SetSpecHashAnnotation(&ds.ObjectMeta, ds.Spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse", func(b *testing.B) {
		m := &Manager{} // requiredFor needs nothing else
		for b.Loop() {
			if _, err := m.requiredFor(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Defect 1 of issue 18: an object this process did not write was adopted
// when its spec-hash annotation matched and its spec was a superset of the
// desired one, so additions made while the controller was down stayed for
// good. After a restart any difference is repaired, additions included.
func TestApplyAfterRestartRemovesAdditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*appsv1.DaemonSet)
	}{
		{"sidecar container", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "quay.io/someone/sidecar:latest"})
		}},
		{"toleration", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "someone", Operator: corev1.TolerationOpExists})
		}},
		{"kube-rbac-proxy arg", func(ds *appsv1.DaemonSet) {
			c := findContainer(&ds.Spec.Template.Spec, ContainerKubeRBACProxy)
			c.Args = append(c.Args, "--insecure-listen-address=0.0.0.0:8080")
		}},
		{"hostPath volume", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, _ := applied(t)
			want := fc.stored().Spec.DeepCopy()
			fc.edit(tc.edit) // while the controller is down; the annotation stays

			restarted := newTestManager(fc)
			res := apply(t, restarted, defaultDesired())
			expectRequests(t, fc, "apply after restart", 0, 1)
			if got := fc.stored().Spec; !equality.Semantic.DeepEqual(*want, got) || !res.Changed {
				t.Errorf("addition (%s) not removed: result %s", tc.name, summary(res))
			}
		})
	}
}

// Defect 1 of issue 18, while running: someone replaces the object (a new
// UID) with an addition and the same annotations.
func TestApplyRepairsRecreatedObjectWithAddition(t *testing.T) {
	fc, m := applied(t)
	want := fc.stored().Spec.DeepCopy()

	theirs := fc.stored().DeepCopy()
	theirs.Spec.Template.Spec.Tolerations = append(theirs.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "someone", Operator: corev1.TolerationOpExists})
	fc.replaceStored(theirs)
	fc.sync()
	fc.client.ClearActions()

	res := apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply over a replaced object", 0, 1)
	if got := fc.stored().Spec; !equality.Semantic.DeepEqual(*want, got) || !res.Changed {
		t.Errorf("replaced object keeps its toleration: result %s", summary(res))
	}
}

// Defect 2 of issue 18: an expectation that timed out stayed pending until
// the next Apply, so a caller that re-asserts when it ends (the control
// loop) was told again and again that it had ended, with no Apply in
// between while the DaemonSet is being deleted. It ends once, and a delete
// ends it too.
func TestExpectationEndsOnceAndWithADelete(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	fc, m := newManagedCluster(t, WithClock(clk))
	apply(t, m, defaultDesired())
	if d, ok := m.Expecting(); !ok || d != ExpectationTimeout {
		t.Fatalf("Expecting = %s, %v; want %s, true", d, ok, ExpectationTimeout)
	}
	clk.SetTime(clk.Now().Add(ExpectationTimeout))
	if d, ok := m.Expecting(); !ok || d != 0 {
		t.Errorf("Expecting at the timeout = %s, %v; want it due once (0, true)", d, ok)
	}
	if d, ok := m.Expecting(); ok {
		t.Errorf("Expecting after the timeout was reported = %s, true; want it over", d)
	}

	apply(t, m, defaultDesired()) // a new object: the create is expected again
	fc.failAll("delete", injectedForbidden())
	fc.deleteStored()
	apply(t, m, defaultDesired())
	if _, ok := m.Expecting(); !ok {
		t.Fatal("not expecting the create")
	}
	if _, err := m.Delete(context.Background()); !apierrors.IsForbidden(err) {
		t.Fatalf("Delete: %v, want the injected Forbidden", err)
	}
	if d, ok := m.Expecting(); ok {
		t.Errorf("Expecting after a delete = %s, true; a delete ends the apply's expectation", d)
	}
}

// Defect 5 of issue 18: owned metadata set back to an older value the
// manager once wrote (a restore, a GitOps sync) was taken for the manager's
// own write. Only the latest owned metadata, or a resourceVersion the
// manager's own write returned, is its own.
func TestRevertedVersionAnnotationIsNotOwn(t *testing.T) {
	fc, m := newManagedCluster(t)
	old := defaultDesired()
	old.Version = "4.21.0"
	first := apply(t, m, old)
	fc.sync()
	next := old
	next.Version = "4.22.0"
	second := apply(t, m, next)
	fc.sync()

	if !m.IsOwnMetadata(first.Object.UID, first.Object.ResourceVersion, OwnedMetadata(first.Object)) {
		t.Error("a late event of the manager's first write is not its own")
	}
	if !m.IsOwnMetadata(second.Object.UID, second.Object.ResourceVersion, OwnedMetadata(second.Object)) {
		t.Error("the manager's latest write is not its own")
	}
	fc.edit(func(ds *appsv1.DaemonSet) { ds.Annotations[VersionAnnotation] = "4.21.0" })
	reverted := fc.stored()
	if m.IsOwnMetadata(reverted.UID, reverted.ResourceVersion, OwnedMetadata(reverted)) {
		t.Error("the version annotation set back to 4.21.0 by someone else is taken for the manager's own write")
	}
}

// foreignSelector is the selector (and pod labels) of a DaemonSet someone
// else put in place of ours.
var foreignSelector = map[string]string{"app": "someone-else"}

// replaceWithForeign deletes the stored DaemonSet and creates one of the same
// name whose selector, labels and image are someone else's (`oc replace
// --force`, a GitOps prune and create), then syncs the cache. It returns the
// new object.
func replaceWithForeign(t *testing.T, fc *fakeCluster) *appsv1.DaemonSet {
	t.Helper()
	theirs := fc.stored().DeepCopy()
	theirs.Labels = foreignSelector
	theirs.Spec.Selector = &metav1.LabelSelector{MatchLabels: foreignSelector}
	theirs.Spec.Template.Labels = foreignSelector
	findContainer(&theirs.Spec.Template.Spec, ContainerExtractor).Image = "quay.io/evil/extractor:latest"
	created := fc.replaceStored(theirs)
	fc.sync()
	fc.client.ClearActions()
	return created
}

// Defect 3 of issue 26: a DaemonSet someone else created with another
// selector cannot be updated into ours (spec.selector is immutable: 422
// Invalid), so the adoption failed for good. It is deleted, with a UID
// precondition and its pods left to the garbage collector, and created anew.
func TestApplyReplacesForeignObjectWithAnotherSelector(t *testing.T) {
	fc, m := applied(t)
	want := fc.stored().Spec.DeepCopy()
	theirs := replaceWithForeign(t, fc)

	res, err := m.Apply(context.Background(), defaultDesired())
	if err != nil {
		t.Fatalf("Apply over a foreign selector: %v", err)
	}
	got := fc.requests()
	expectRequests(t, fc, "apply over a foreign selector", 0, 3)
	if want := []string{"update", "delete", "create"}; !slices.Equal(got.Verbs, want) {
		t.Errorf("requests %v, want %v", got.Verbs, want)
	}
	stored := fc.stored()
	if stored == nil || stored.UID == theirs.UID || !equality.Semantic.DeepEqual(*want, stored.Spec) {
		t.Fatalf("the foreign DaemonSet was not replaced by ours: stored %v", stored)
	}
	if !res.Changed || !res.Created || !res.Rolls || res.Object.UID != stored.UID {
		t.Errorf("result %s (created %v, rolls %v), want a create that rolls", summary(res), res.Created, res.Rolls)
	}
	if res.Replaced != theirs.UID || !strings.Contains(res.ReplacedBecause, "app=someone-else") || !strings.Contains(res.ReplacedBecause, "immutable") {
		t.Errorf("Replaced = %q because %q; want %q, naming the selector and why", res.Replaced, res.ReplacedBecause, theirs.UID)
	}
	if m.ownedUID() != stored.UID || !m.IsOwnWrite(stored.UID, stored.Generation) || m.IsOwnWrite(theirs.UID, theirs.Generation) {
		t.Errorf("owned %q, want the new object %q only", m.ownedUID(), stored.UID)
	}
	expectEvents(t, fc, "replace", EventReasonCreated, EventReasonDeleted, EventReasonCreated)

	fc.sync()
	apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply after the replace", 0, 0)
}

// The replacing delete names the foreign object by UID (never one created
// since) and lets the garbage collector remove its pods in the background:
// the name is free at once, and the pods of the foreign selector go.
func TestReplaceDeletesOnlyTheForeignObject(t *testing.T) {
	fc, m := applied(t)
	theirs := replaceWithForeign(t, fc)

	apply(t, m, defaultDesired())
	var del clienttesting.DeleteAction
	for _, a := range fc.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			del = d
		}
	}
	if del == nil {
		t.Fatal("no delete sent")
	}
	opts := del.GetDeleteOptions()
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != theirs.UID {
		t.Errorf("delete preconditions %v, want UID %q", opts.Preconditions, theirs.UID)
	}
	if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
		t.Errorf("delete propagation %v, want Background", opts.PropagationPolicy)
	}
}

// A replacement whose delete a finalizer holds: the create meets the old
// object (AlreadyExists), a fresh read shows it being deleted, and the apply
// ends without a write or an error. Its deletion event brings the next apply,
// which creates; nothing spins meanwhile.
func TestReplaceHeldByAFinalizerWaitsForTheDeletion(t *testing.T) {
	// The lost race's wait for the cache costs no time on a fake clock.
	fc, m := applied(t, WithClock(clocktesting.NewFakeClock(time.Now())))
	theirs := replaceWithForeign(t, fc)
	fc.client.PrependReactor("delete", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		held := fc.stored().DeepCopy()
		now := metav1.Now()
		held.DeletionTimestamp = &now
		held.Finalizers = []string{"example.com/someone-else"}
		if _, err := fc.srv.Update(held); err != nil {
			return true, nil, err
		}
		return true, nil, nil
	})

	res, err := m.Apply(context.Background(), defaultDesired())
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	expectRequests(t, fc, "replace held by a finalizer", 1, 3) // update (422), delete, create (AlreadyExists), GET
	if res.Changed || res.Replaced != "" || res.Object.UID != theirs.UID {
		t.Errorf("result %s (replaced %q), want no write while %q is being deleted", summary(res), res.Replaced, theirs.UID)
	}

	// The finalizer goes and the object with it: the next apply creates.
	fc.deleteStored()
	fc.sync()
	fc.client.ClearActions()
	res = apply(t, m, defaultDesired())
	expectRequests(t, fc, "apply after the deletion", 0, 1)
	if !res.Created || fc.stored().Spec.Selector.MatchLabels["app"] != "" {
		t.Errorf("result %s, selector %v; want ours created", summary(res), fc.stored().Spec.Selector)
	}
}

// An update invalid for more than the selector is not cured by a replace:
// the foreign object stays and the error is returned.
func TestApplyDoesNotReplaceOnOtherInvalidUpdates(t *testing.T) {
	fc, m := applied(t)
	replaceWithForeign(t, fc)
	fc.client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(appsv1.SchemeGroupVersion.WithKind("DaemonSet").GroupKind(), DaemonSetName, field.ErrorList{
			field.Invalid(field.NewPath("spec", "selector"), nil, "field is immutable"),
			field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), "", "required"),
		})
	})
	if _, err := m.Apply(context.Background(), defaultDesired()); !apierrors.IsInvalid(err) {
		t.Fatalf("Apply error = %v, want the wrapped Invalid", err)
	}
	expectRequests(t, fc, "invalid update", 0, 1)
}

// Someone replaces the foreign object again between the manager's read and
// its delete: the UID precondition fails (Conflict), so the newer object is
// not deleted blindly; a fresh read names it, someone else's new object,
// whose replace is the repair gate's to decide.
func TestReplaceNeverDeletesAnUnreadObject(t *testing.T) {
	// The lost race's wait for the cache costs no time on a fake clock.
	fc, m := applied(t, WithClock(clocktesting.NewFakeClock(time.Now())))
	first := replaceWithForeign(t, fc)
	var second *appsv1.DaemonSet
	fc.client.PrependReactor("delete", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		if second != nil {
			return false, nil, nil
		}
		second = fc.replaceStored(fc.stored())
		return false, nil, nil // the server's precondition check runs next
	})

	_, err := m.Apply(context.Background(), defaultDesired())
	if !errors.Is(err, ErrLostToAnotherWriter) {
		t.Fatalf("Apply error = %v, want ErrLostToAnotherWriter: the second object is someone else's change", err)
	}
	expectRequests(t, fc, "replace raced by another replace", 1, 2) // update, delete (Conflict), GET
	if second == nil || fc.stored() == nil || fc.stored().UID != second.UID || second.UID == first.UID {
		t.Errorf("stored %v; want the second object, not deleted, left to the repair gate", fc.stored())
	}
}

// The DaemonSet controller's status stream during a rollout: each of the
// first two attempts meets a status update the cache shows and a newer one it
// does not yet. A second lost race says the cache is behind a stream of
// writes: the third attempt reads the server instead of trying the cache's
// stale copy again (one CI run saw 4 conflicts in one repair).
func TestSecondLostRaceReadsTheServer(t *testing.T) {
	fc, m := drifted(t)
	stream := 2
	fc.client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" || stream == 0 {
			return false, nil, nil
		}
		stream--
		for i := range 2 {
			ds := fc.stored().DeepCopy()
			ds.Status.NumberAvailable++
			if _, err := fc.srv.UpdateStatus(ds); err != nil {
				t.Errorf("status write: %v", err)
			}
			if i == 0 {
				fc.sync() // the informer delivers the first; the second is in flight
			}
		}
		return false, nil, nil // the server refuses the stale resourceVersion
	})
	res := apply(t, m, defaultDesired())
	got := fc.requests()
	if want := []string{"update", "update", "get", "update"}; !slices.Equal(got.Verbs, want) || !res.Changed || fc.stored().Spec.MinReadySeconds != 0 {
		t.Errorf("requests %v, result %s; want %v and the spec restored", got.Verbs, summary(res), want)
	}
}
