package runtimeextractor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

func newTestInformer(t *testing.T) *daemonSetInformer {
	t.Helper()
	rec := events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(time.Now()))
	ri, err := NewResourceInformer(rec, informers.NewSharedInformerFactory(fake.NewClientset(), 0))
	if err != nil {
		t.Fatal(err)
	}
	return ri
}

// ownUpTo is the record of own writes: object uid at generations up to own(uid).
type ownUpTo func(types.UID, int64) bool

func (o ownUpTo) Owns(uid types.UID) bool                               { return o(uid, 0) }
func (o ownUpTo) IsOwnWrite(uid types.UID, generation int64) bool       { return o(uid, generation) }
func (ownUpTo) IsOwnMetadata(types.UID, string, map[string]string) bool { return false }
func (ownUpTo) ClaimUnanswered(core.Observation) bool                   { return false }
func (ownUpTo) AwaitsOwnWrite() bool                                    { return false }
func (ownUpTo) ObservedDeletion(types.UID)                              {}

// classified is what the loop's drain makes of each observation ri queued, on its own, with
// the view showing the observed object and own as the record of own writes.
func classified(ri *daemonSetInformer, own ownUpTo) map[DriftKind]int {
	out := map[DriftKind]int{}
	for _, o := range ri.drainDrift() {
		seen := core.Seen{Present: o.Kind != DriftDeleted, UID: o.UID, Version: o.Version, Meta: o.Meta}
		for _, k := range core.New(core.DefaultPolicy(), time.Minute).Classify([]observation{o}, seen, own, true).Kinds {
			out[k]++
		}
	}
	return out
}

func managed(gen int64, mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: resources.Namespace, Name: resources.DaemonSetName, UID: "uid-1", Generation: gen,
		Labels:      resources.OwnedLabels(),
		Annotations: map[string]string{resources.VersionAnnotation: "4.21.0", resources.SpecHashAnnotation: "abc"},
	}}
	for _, k := range resources.OwnedAnnotations() { // the manifest's: the capability, the cluster profiles
		if ds.Annotations[k] == "" {
			ds.Annotations[k] = "true"
		}
	}
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

// Two of the annotations the manifest sets and the apply enforces.
const (
	capabilityAnnotation = "capability.openshift.io/name"
	includeSelfManaged   = "include.release.openshift.io/self-managed-high-availability"
)

func TestInformerFiltering(t *testing.T) {
	notOwn := ownUpTo(func(types.UID, int64) bool { return false })
	upTo := func(gen int64) ownUpTo {
		return func(uid types.UID, g int64) bool { return uid == "uid-1" && g <= gen }
	}
	cases := []struct {
		name string
		own  ownUpTo
		feed func(ri *daemonSetInformer)
		want map[DriftKind]int
	}{
		{"status-only update is ignored", notOwn, func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(3, func(ds *appsv1.DaemonSet) { ds.Status.NumberAvailable = 2 }))
		}, map[DriftKind]int{}},
		{"own write is ignored", upTo(4), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(4))
		}, map[DriftKind]int{}},
		{"spec change by someone else counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(4))
		}, map[DriftKind]int{DriftModified: 1}},
		{"owned label removed counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(3, func(ds *appsv1.DaemonSet) { delete(ds.Labels, resources.LabelManagedBy) }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"owned annotation changed counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(3, func(ds *appsv1.DaemonSet) { ds.Annotations[resources.VersionAnnotation] = "1.0" }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		// Issue 46, escape 2: the apply puts the manifest's annotations back,
		// so their removal is drift too, not a resync's silent write.
		{"the capability annotation removed counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(3, func(ds *appsv1.DaemonSet) { delete(ds.Annotations, capabilityAnnotation) }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"a cluster profile annotation changed counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(3, func(ds *appsv1.DaemonSet) { ds.Annotations[includeSelfManaged] = "false" }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"own create without the capability annotation counts", upTo(1), func(ri *daemonSetInformer) {
			ri.onAdd(managed(1, func(ds *appsv1.DaemonSet) { delete(ds.Annotations, capabilityAnnotation) }), false)
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"own spec write with a new spec hash is left to the drain", upTo(4), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(4, func(ds *appsv1.DaemonSet) { ds.Annotations[resources.SpecHashAnnotation] = "def" }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"own spec write coalesced with an owned label removed counts", upTo(4), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(4, func(ds *appsv1.DaemonSet) { delete(ds.Labels, resources.LabelManagedBy) }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"own spec write coalesced with an owned annotation removed counts", upTo(4), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3), managed(4, func(ds *appsv1.DaemonSet) { delete(ds.Annotations, resources.VersionAnnotation) }))
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"restoring owned metadata is not drift", upTo(3), func(ri *daemonSetInformer) {
			ri.onUpdate(managed(3, func(ds *appsv1.DaemonSet) { delete(ds.Labels, resources.LabelManagedBy) }), managed(3))
		}, map[DriftKind]int{}},
		{"delete counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onDelete(managed(3))
		}, map[DriftKind]int{DriftDeleted: 1}},
		{"tombstone counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onDelete(cache.DeletedFinalStateUnknown{Key: "openshift-insights/insights-runtime-extractor", Obj: managed(3)})
		}, map[DriftKind]int{DriftDeleted: 1}},
		{"add by someone else counts", upTo(3), func(ri *daemonSetInformer) {
			ri.onAdd(managed(1, func(ds *appsv1.DaemonSet) { ds.UID = "uid-2" }), false)
		}, map[DriftKind]int{DriftModified: 1}},
		{"add in the initial list is an observation, not drift", notOwn, func(ri *daemonSetInformer) {
			ri.onAdd(managed(1), true)
		}, map[DriftKind]int{}},
		{"own create is ignored", upTo(1), func(ri *daemonSetInformer) {
			ri.onAdd(managed(1), false)
		}, map[DriftKind]int{}},
		// A re-list that first shows the controller's object can fold
		// someone's removal of an owned label into the Add.
		{"own create without an owned label counts", upTo(1), func(ri *daemonSetInformer) {
			ri.onAdd(managed(1, func(ds *appsv1.DaemonSet) { delete(ds.Labels, resources.LabelManagedBy) }), false)
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"own create without the version annotation counts", upTo(1), func(ri *daemonSetInformer) {
			ri.onAdd(managed(1, func(ds *appsv1.DaemonSet) { delete(ds.Annotations, resources.VersionAnnotation) }), false)
		}, map[DriftKind]int{DriftMetadata: 1}},
		{"other DaemonSets are ignored", notOwn, func(ri *daemonSetInformer) {
			other := managed(2, func(ds *appsv1.DaemonSet) { ds.Name = "other" })
			ri.onUpdate(managed(1, func(ds *appsv1.DaemonSet) { ds.Name = "other" }), other)
			ri.onDelete(other)
		}, map[DriftKind]int{}},
	}
	for i, tc := range cases {
		ri := newTestInformer(t)
		tc.feed(ri)
		got := classified(ri, tc.own)
		if len(got) != len(tc.want) {
			t.Errorf("#%d %s: got %v, want %v", i, tc.name, got, tc.want)
			continue
		}
		for k, n := range tc.want {
			if got[k] != n {
				t.Errorf("#%d %s: got %v, want %v", i, tc.name, got, tc.want)
			}
		}
	}
}

func kinds(obs []observation) map[DriftKind]int {
	out := map[DriftKind]int{}
	for _, o := range obs {
		out[o.Kind]++
	}
	return out
}

func TestNotificationsCoalesceAndNeverBlock(t *testing.T) {
	ri := newTestInformer(t)
	for i := 0; i < 100; i++ {
		ri.onDelete(managed(1)) // would block forever if a notification could block
	}
	if got := kinds(ri.drainDrift())[DriftDeleted]; got != 100 {
		t.Fatalf("counted %d deletions, want 100", got)
	}
	if len(ri.rollout) != 1 {
		t.Fatalf("rollout channel holds %d notifications, want 1 (coalesced)", len(ri.rollout))
	}
}

// newSyncedInformer runs an informer over a fake clientset holding objs until
// the test ends, and waits for its cache.
func newSyncedInformer(t *testing.T, objs ...runtime.Object) *daemonSetInformer {
	t.Helper()
	rec := events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(time.Now()))
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	ri, err := NewResourceInformer(rec, factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), ri.informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return ri
}

// A re-list that shows no DaemonSet reports the absence when the replace of
// the cache will not: the cache holds none, or only one already known gone.
// The controller then compares it with the level it wants.
func TestRelistReportsADaemonSetGoneUnseen(t *testing.T) {
	seenOnlyByProbe := managed(1, func(ds *appsv1.DaemonSet) { ds.UID = "uid-probed" })
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		prepare func(*daemonSetInformer)
		listed  *appsv1.DaemonSet
		want    []observation
	}{
		{"nothing cached, nothing listed", nil, nil, nil,
			[]observation{{Kind: DriftDeleted}}},
		{"cached, nothing listed: the replace reports it", []runtime.Object{managed(1)}, nil, nil,
			nil},
		{"cached but known gone, nothing listed", []runtime.Object{managed(1)}, func(ri *daemonSetInformer) { ri.markGone("uid-1") }, nil,
			[]observation{{Kind: DriftDeleted}}},
		{"seen only by a live read, nothing listed", nil, func(ri *daemonSetInformer) {
			ri.probing, ri.probed = true, seenOnlyByProbe
		}, nil, []observation{{Kind: DriftDeleted, UID: "uid-probed"}}},
		{"listed: the replace reports any change", nil, nil, managed(1),
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ri := newSyncedInformer(t, tc.objs...)
			if tc.prepare != nil {
				tc.prepare(ri)
			}
			ri.relisted(tc.listed)
			got := ri.drainDrift()
			if len(got) != len(tc.want) {
				t.Fatalf("observed %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Kind != tc.want[i].Kind || got[i].UID != tc.want[i].UID || got[i].Expected {
					t.Fatalf("observed %+v, want %+v", got, tc.want)
				}
			}
			if tc.want != nil {
				if ds, ok := ri.current(); ok {
					t.Fatalf("the view still shows %s after a re-list without it", ds.UID)
				}
			}
		})
	}
}

// The first list, before the sync, is the controller's first observation.
func TestFirstListReportsNothing(t *testing.T) {
	ri := newTestInformer(t)
	ri.relisted(nil)
	if got := ri.drainDrift(); len(got) != 0 {
		t.Fatalf("observed %+v before the sync", got)
	}
}

// The first live read to reach the server after a gap (an outage) reports a
// DaemonSet it does not find even when the view had none: the view may never
// have seen one created and deleted meanwhile. Later reads that keep finding
// nothing report nothing more.
func TestFirstLiveReadAfterAGapReportsAbsence(t *testing.T) {
	ri := newSyncedInformer(t)
	if !ri.probe(context.Background(), true) {
		t.Fatal("the live read did not reach the fake API server")
	}
	if got := ri.drainDrift(); len(got) != 1 || got[0].Kind != DriftDeleted {
		t.Fatalf("first read after a gap observed %+v, want one deletion", got)
	}
	ri.probe(context.Background(), false)
	if got := ri.drainDrift(); len(got) != 0 {
		t.Fatalf("a later read observed %+v, want nothing", got)
	}
}

// holdingWatch serves the informer's DaemonSet watches from the fake API
// server's, but drops their events while holding; expire then ends the
// current watch with 410 Expired, as an API server restart does, so that the
// reflector re-lists (and live reads bridge the gap). What was dropped reaches
// the informer as one update, from the cache's object to the server's.
type holdingWatch struct {
	api     *fakeapi.Server
	holding atomic.Bool
	mu      sync.Mutex
	expired chan struct{} // closed to expire the current watch
}

func (hw *holdingWatch) react(a clienttesting.Action) (bool, watch.Interface, error) {
	inner, err := hw.api.Client.Tracker().Watch(a.GetResource(), a.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	expired := make(chan struct{})
	hw.mu.Lock()
	hw.expired = expired
	hw.mu.Unlock()
	ch := make(chan watch.Event)
	out := watch.NewProxyWatcher(ch)
	go func() {
		defer inner.Stop()
		send := func(e watch.Event) bool {
			select {
			case ch <- e:
				return true
			case <-out.StopChan():
				return false
			}
		}
		for {
			select {
			case e, ok := <-inner.ResultChan():
				if !ok {
					close(ch)
					return
				}
				if !hw.holding.Load() && !send(e) {
					return
				}
			case <-expired:
				send(watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version").ErrStatus})
				return
			case <-out.StopChan():
				return
			}
		}
	}()
	return true, out, nil
}

// expire stops holding and ends the current watch with 410 Expired.
func (hw *holdingWatch) expire() {
	hw.holding.Store(false)
	hw.mu.Lock()
	defer hw.mu.Unlock()
	close(hw.expired)
}

// daemonSetGets counts the live reads of the DaemonSet.
func (h *harness) daemonSetGets() int {
	n := 0
	for _, a := range h.api.Client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "daemonsets" {
			n++
		}
	}
	return n
}

// Issue 26, defect 7: the controller's spec write and someone's removal of an
// owned label at the same generation, seen as one update (a re-list, or a
// live read while the watch is broken), were taken for the controller's own
// write. Made while the write was still expected, the label came back at the
// expectation's re-assert, unreported; made after it, only at the next
// resync, 10 minutes later. Either way it is a repair of someone else's
// change, reported as one.
func TestCoalescedOwnWriteAndLabelRemovalIsRepaired(t *testing.T) {
	for _, tc := range []struct {
		name string
		// afterExpectation: the label is removed after the expectation of the
		// write ended with a live read (the cache never showed the write).
		afterExpectation bool
	}{
		{"while the write is expected", false},
		{"after the expectation ended", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newSettableTLS(nil, nil)
			var hw *holdingWatch
			h := startWith(t, func(h *harness) {
				hw = &holdingWatch{api: h.api}
				h.api.Client.PrependWatchReactor("daemonsets", hw.react)
				withTLS(src)(h)
			})
			h.rollOut()
			h.waitState(fsm.StateRunning)

			hw.holding.Store(true)
			gets := h.daemonSetGets()
			h.signalTLS(src, modernProfile, nil) // the controller's spec write
			ours := h.waitStored("Modern's arguments", func(ds *appsv1.DaemonSet) bool {
				return slices.Equal(proxyTLSArgs(t, ds), []string{"--tls-min-version=VersionTLS13"})
			})
			if tc.afterExpectation {
				// resources.ExpectationTimeout after the write, the controller
				// re-asserts, reading the server: the cache is behind.
				h.eventually("the re-assert's live read", func() bool { return h.daemonSetGets() > gets })
			}
			removed := ours.DeepCopy()
			delete(removed.Labels, resources.LabelManagedBy)
			if _, err := h.api.Update(removed); err != nil {
				t.Fatal(err)
			}
			if h.stored().Generation != ours.Generation {
				t.Fatal("the label's removal moved the generation")
			}
			hw.expire()
			h.waitStored("the managed-by label to be restored", func(ds *appsv1.DaemonSet) bool {
				return ds.Labels[resources.LabelManagedBy] == resources.ManagedByValue
			})
			h.eventually("an Event saying the label was repaired", func() bool {
				return h.changes.mentions(ReasonUpdated, "repaired a change made by someone else (owned label or annotation changed")
			})
		})
	}
}
