package runtimeextractor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	appsclientv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// runHoldingRelists starts the harness, after prepare, with the fake config
// and the production backoff, but its informer's lists after the first wait
// until the test ends: only live reads can then show a change, so a test that
// passes with it would pass however long the reflector's backoff before it
// re-lists. (A reactor cannot wait: the fake clientset runs reactors under its
// lock.)
func runHoldingRelists(t *testing.T, prepare func(*harness)) *harness {
	t.Helper()
	return startWith(t, func(h *harness) {
		prepare(h)
		h.informerClient = &heldRelists{Clientset: h.api.Client}
		h.notifier = newFakeConfig()
		h.limiterOverride = defaultRateLimiter()
	})
}

// heldRelists is the fake clientset with DaemonSet lists after the first held
// until their context ends.
type heldRelists struct {
	*fake.Clientset
	lists atomic.Int32
}

func (h *heldRelists) AppsV1() appsclientv1.AppsV1Interface {
	return heldApps{AppsV1Interface: h.Clientset.AppsV1(), h: h}
}

type heldApps struct {
	appsclientv1.AppsV1Interface
	h *heldRelists
}

func (a heldApps) DaemonSets(namespace string) appsclientv1.DaemonSetInterface {
	return heldDaemonSets{DaemonSetInterface: a.AppsV1Interface.DaemonSets(namespace), h: a.h}
}

type heldDaemonSets struct {
	appsclientv1.DaemonSetInterface
	h *heldRelists
}

func (d heldDaemonSets) List(ctx context.Context, o metav1.ListOptions) (*appsv1.DaemonSetList, error) {
	if d.h.lists.Add(1) > 1 {
		<-ctx.Done()
		return nil, fmt.Errorf("list held: %w", ctx.Err())
	}
	return d.DaemonSetInterface.List(ctx, o)
}

// expiredWatch ends at once with 410 Expired, as a watch resumed after an
// API server restart does.
func expiredWatch() watch.Interface {
	w := watch.NewFakeWithChanSize(1, false)
	w.Error(&apierrors.NewResourceExpired("too old resource version: 5 (40)").ErrStatus)
	return w
}

// While the DaemonSet watch does not work (the reflector backs off up to 30 s
// before it lists again), live reads stand in for it: a deletion is still
// repaired promptly. Behind a load balancer a lost connection does not fail the
// watch call: client-go retries, then returns an empty watch and no error; and
// a watch resumed after an API server restart ends at once with 410 Expired.
func TestBrokenWatchIsBridgedByLiveReads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(n int32) (watch.Interface, error)
	}{
		{"watch calls fail", func(int32) (watch.Interface, error) {
			return nil, errors.New("connection refused")
		}},
		{"watches end at once, empty, without an error", func(int32) (watch.Interface, error) {
			return watch.NewEmptyWatch(), nil
		}},
		{"watches end at once with 410 Expired", func(int32) (watch.Interface, error) {
			return expiredWatch(), nil
		}},
		{"an empty watch, then 410 Expired", func(n int32) (watch.Interface, error) {
			if n == 1 {
				return watch.NewEmptyWatch(), nil
			}
			return expiredWatch(), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var watches atomic.Int32
			h := runHoldingRelists(t, func(h *harness) {
				h.api.Client.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
					w, err := tc.watch(watches.Add(1))
					return true, w, err
				})
			})
			first := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
			h.eventually("a live read to show the created DaemonSet", func() bool { ds, ok := h.ctrl.informer.current(); return ok && ds.UID == first.UID })

			if err := h.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName); err != nil {
				t.Fatal(err)
			}
			h.waitStored("the DaemonSet to be recreated without a watch", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != first.UID })
		})
	}
}

// A working watch costs no request: the live reads that bridged a broken one
// stop once its successor has stayed open, quiet, for establishGrace.
func TestWorkingWatchCostsNoLiveReads(t *testing.T) {
	var watches atomic.Int32
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
			if watches.Add(1) == 1 {
				return true, watch.NewEmptyWatch(), nil // a lost connection
			}
			return false, nil, nil // the fake API server's watch
		})
		h.notifier = newFakeConfig()
		h.limiterOverride = defaultRateLimiter()
	})
	h.eventually("the watch to count as broken", func() bool { return h.ctrl.informer.watch.broken.Load() })
	h.eventually("a live read", func() bool { return liveReads(h.api) > 0 })
	h.eventually("the watch to work again", func() bool { return !h.ctrl.informer.watch.broken.Load() })
	time.Sleep(probeInterval + probeTimeout) // a read already under way may finish
	h.api.Client.ClearActions()
	time.Sleep(3 * probeInterval)
	if n := liveReads(h.api); n != 0 {
		t.Fatalf("%d live read(s) of the DaemonSet while the watch works, want none", n)
	}
}

func liveReads(api *fakeapi.Server) int {
	n := 0
	for _, a := range api.Client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "daemonsets" {
			n++
		}
	}
	return n
}

// The rare stall of issue 11: the controller re-created the DaemonSet just
// before an outage, its watch never delivered that, someone deleted it, and
// the re-list after the outage shows nothing, as the cache does: the replace
// reports no change, and the controller waited for a rollout that never came
// (until the 10-minute resync). Live reads fail here, so only the re-list can
// tell.
func TestRelistShowingTheDaemonSetGoneRepairsIt(t *testing.T) {
	first := watch.NewFake() // quiet: the cache never hears of the created DaemonSet
	var watches atomic.Int32
	h := startWith(t, func(h *harness) {
		h.api.Client.PrependReactor("get", "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection reset by peer")
		})
		h.api.Client.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
			if watches.Add(1) == 1 {
				return true, first, nil
			}
			return true, watch.NewFake(), nil
		})
		h.notifier = newFakeConfig()
		h.limiterOverride = defaultRateLimiter()
	})
	created := h.waitStored("the DaemonSet", func(ds *appsv1.DaemonSet) bool { return ds != nil })
	if _, ok := h.ctrl.informer.current(); ok {
		t.Fatal("the informer saw the created DaemonSet; the test needs a cache that did not")
	}

	if err := h.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName); err != nil {
		t.Fatal(err)
	}
	first.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	h.waitStored("the DaemonSet to be recreated after the re-list", func(ds *appsv1.DaemonSet) bool { return ds != nil && ds.UID != created.UID })
}

// newTestHealth is a watchHealth without a client: nothing probes, the test
// reads its state and wake channel.
func newTestHealth() *watchHealth { return newWatchHealth(nil) }

func woken(h *watchHealth) bool {
	select {
	case <-h.wake:
		return true
	default:
		return false
	}
}

// readAll reads w until it closes, in the background, as the reflector does.
func readAll(w watch.Interface) <-chan []watch.Event {
	out := make(chan []watch.Event, 1)
	go func() {
		var got []watch.Event
		for e := range w.ResultChan() {
			got = append(got, e)
		}
		out <- got
	}()
	return out
}

func reflectorOptions(timeout int64) metav1.ListOptions {
	return metav1.ListOptions{TimeoutSeconds: ptr.To(timeout), AllowWatchBookmarks: true}
}

func TestObservedWatchJudgesTheConnection(t *testing.T) {
	ds := managed(1)
	bookmark := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10"}}
	for _, tc := range []struct {
		name       string
		wasBroken  bool
		feed       func(*watch.FakeWatcher)
		wantBroken bool
	}{
		{"an empty watch (a lost connection, as client-go returns it) is broken", false, func(w *watch.FakeWatcher) { w.Stop() }, true},
		{"410 Expired is broken", false, func(w *watch.FakeWatcher) {
			w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
			w.Stop()
		}, true},
		{"an event re-establishes", true, func(w *watch.FakeWatcher) { w.Add(ds) }, false},
		{"a bookmark re-establishes", true, func(w *watch.FakeWatcher) { w.Action(watch.Bookmark, bookmark) }, false},
		{"a watch that delivered events and then lost its connection is broken", false, func(w *watch.FakeWatcher) {
			w.Add(ds)
			w.Stop()
		}, true},
		{"a working watch that sees an event stays working", false, func(w *watch.FakeWatcher) { w.Modify(ds) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHealth()
			h.broken.Store(tc.wasBroken)
			inner := watch.NewFakeWithChanSize(4, false)
			w := h.instrument(inner, reflectorOptions(300), nil)
			got := readAll(w)
			tc.feed(inner)
			time.Sleep(50 * time.Millisecond) // the wrapper forwards at once; give it the moment
			if b := h.broken.Load(); b != tc.wantBroken {
				t.Errorf("broken = %v, want %v", b, tc.wantBroken)
			}
			if tc.wantBroken && !tc.wasBroken && !woken(h) {
				t.Error("the bridge was not woken")
			}
			w.Stop()
			<-got
		})
	}
}

// A quiet watch says nothing: after establishGrace without an error it counts
// as working (kube-apiserver would have rejected a stale resourceVersion at
// once), so a healthy but idle watch costs no live reads.
func TestQuietWatchCountsAsWorkingAfterGrace(t *testing.T) {
	h := newTestHealth()
	h.broken.Store(true)
	inner := watch.NewFake()
	w := h.instrument(inner, reflectorOptions(300), nil)
	defer w.Stop()
	if !h.broken.Load() {
		t.Fatal("working before any event or the grace")
	}
	deadline := time.Now().Add(establishGrace + 2*time.Second)
	for h.broken.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.broken.Load() {
		t.Fatalf("still broken %s after a quiet watch opened", establishGrace+2*time.Second)
	}
}

// A watch the server ends at the timeout it was asked for is a normal end;
// one without a timeout that ends is a lost connection.
func TestWatchEndingAtItsTimeoutIsNotBroken(t *testing.T) {
	h := newTestHealth()
	ow := &observedWatch{health: h, timeout: 10 * time.Minute}
	ow.ended(10*time.Minute - time.Second)
	if h.broken.Load() {
		t.Fatal("a watch that ended at its timeout counts as broken")
	}
	ow.ended(30 * time.Second)
	if !h.broken.Load() {
		t.Fatal("a watch that ended long before its timeout counts as working")
	}
	h = newTestHealth()
	(&observedWatch{health: h}).ended(time.Hour)
	if !h.broken.Load() {
		t.Fatal("a watch without a timeout that ended counts as working")
	}
}

// Stop returns, and the wrapper's goroutine ends, even when the consumer has
// stopped reading with an event in flight (watch.Filter leaked its goroutine
// there; TestMain's goleak check would fail).
func TestObservedWatchStopsWithoutAReader(t *testing.T) {
	h := newTestHealth()
	inner := watch.NewFakeWithChanSize(2, false)
	w := h.instrument(inner, reflectorOptions(300), nil)
	inner.Add(managed(1))
	inner.Add(managed(2))
	time.Sleep(20 * time.Millisecond) // the wrapper now waits to hand over the first event
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(testwait.Patience):
		t.Fatal("Stop did not return")
	}
	w.Stop() // twice is fine
	for range w.ResultChan() {
	}
	if h.broken.Load() {
		t.Fatal("a watch its consumer stopped counts as broken")
	}
}

// A watch-list (what client-go's reflector uses against a 1.35 API server
// instead of a list) hands what its initial events listed to the re-list
// check, once, at the bookmark that ends them; a plain watch never does.
func TestWatchListInitialEventsAreTheList(t *testing.T) {
	endOfList := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "12",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	watchList := reflectorOptions(300)
	watchList.SendInitialEvents = ptr.To(true)
	watchList.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	for _, tc := range []struct {
		name   string
		opts   metav1.ListOptions
		feed   func(*watch.FakeWatcher)
		calls  int
		listed bool // the DaemonSet, rather than nil
	}{
		{"the DaemonSet listed", watchList, func(w *watch.FakeWatcher) {
			w.Add(managed(1))
			w.Action(watch.Bookmark, endOfList)
			w.Delete(managed(1)) // a change after the list
			w.Action(watch.Bookmark, endOfList)
		}, 1, true},
		{"nothing listed", watchList, func(w *watch.FakeWatcher) { w.Action(watch.Bookmark, endOfList) }, 1, false},
		{"a plain watch lists nothing", reflectorOptions(300), func(w *watch.FakeWatcher) {
			w.Add(managed(1))
			w.Action(watch.Bookmark, endOfList)
		}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*appsv1.DaemonSet
			inner := watch.NewFakeWithChanSize(8, false)
			w := newTestHealth().instrument(inner, tc.opts, func(ds *appsv1.DaemonSet) {
				mu.Lock()
				got = append(got, ds)
				mu.Unlock()
			})
			events := readAll(w)
			tc.feed(inner)
			inner.Stop()
			<-events
			w.Stop()
			mu.Lock()
			defer mu.Unlock()
			if len(got) != tc.calls {
				t.Fatalf("listed called %d times, want %d", len(got), tc.calls)
			}
			if tc.calls > 0 && (got[0] != nil) != tc.listed {
				t.Fatalf("listed %v, want the DaemonSet: %v", got[0], tc.listed)
			}
		})
	}
}

// Once the watch works again, the view is the cache at once, not the last
// live read of the broken spell: the bridge forgets that read only after its
// next wait (up to probeInterval), and a deletion the re-established watch
// delivers meanwhile would otherwise be repaired from a view that still
// shows the DaemonSet, which writes nothing, and wait for the resync.
func TestViewIsTheCacheOnceTheWatchWorks(t *testing.T) {
	api := fakeapi.New()
	factory := informers.NewSharedInformerFactoryWithOptions(api.Client, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(time.Now())), factory)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.21.0"})
	if err != nil {
		t.Fatal(err)
	}
	ds.UID = "uid-1"
	idx := ri.informer.GetIndexer()
	if err := idx.Add(ds); err != nil {
		t.Fatal(err)
	}
	ri.watch.failed(errors.New("connection refused"))
	ri.mu.Lock()
	ri.probing, ri.probed = true, ds // the bridge's live read
	ri.mu.Unlock()

	ri.watch.established()
	if err := idx.Delete(ds); err != nil { // the deletion the working watch delivers
		t.Fatal(err)
	}
	if got, ok := ri.current(); ok {
		t.Fatalf("the view shows %s after the working watch delivered its deletion", got.UID)
	}
}
