package resources

import (
	"testing"

	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

var daemonSetsResource = fakeapi.DaemonSets

// fakeCluster is the fake API server of pkg/internal/fakeapi (UIDs,
// resourceVersion conflicts, a generation that moves only when the spec
// changes) with a lister over an indexer that the test syncs explicitly, so
// a stale cache can be staged.
type fakeCluster struct {
	t        *testing.T
	srv      *fakeapi.Server
	client   *fake.Clientset
	indexer  cache.Indexer
	lister   appslisters.DaemonSetLister
	recorder events.InMemoryRecorder
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	srv := fakeapi.New()
	fc := &fakeCluster{
		t:        t,
		srv:      srv,
		client:   srv.Client,
		indexer:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		recorder: events.NewInMemoryRecorder("test", clocktesting.NewFakePassiveClock(fakeNow)),
	}
	fc.lister = appslisters.NewDaemonSetLister(fc.indexer)
	return fc
}

// sync makes the cache show what the API server holds, like a caught-up informer.
func (fc *fakeCluster) sync() {
	fc.t.Helper()
	obj, err := fc.client.Tracker().Get(daemonSetsResource, Namespace, DaemonSetName)
	switch {
	case apierrors.IsNotFound(err):
		for _, cached := range fc.indexer.List() {
			if err := fc.indexer.Delete(cached); err != nil {
				fc.t.Fatalf("clear cache: %v", err)
			}
		}
	case err != nil:
		fc.t.Fatalf("read tracker: %v", err)
	default:
		if err := fc.indexer.Update(obj); err != nil {
			fc.t.Fatalf("update cache: %v", err)
		}
	}
}

// stored returns the DaemonSet the API server holds, or nil.
func (fc *fakeCluster) stored() *appsv1.DaemonSet {
	fc.t.Helper()
	obj, err := fc.client.Tracker().Get(daemonSetsResource, Namespace, DaemonSetName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		fc.t.Fatalf("read tracker: %v", err)
	}
	return obj.(*appsv1.DaemonSet)
}

// edit changes the stored DaemonSet through the API, as another actor
// would, then syncs the cache and forgets the actions it took.
func (fc *fakeCluster) edit(mutate func(*appsv1.DaemonSet)) {
	fc.t.Helper()
	ds := fc.stored().DeepCopy()
	mutate(ds)
	if _, err := fc.srv.Update(ds); err != nil {
		fc.t.Fatalf("edit: %v", err)
	}
	fc.sync()
	fc.client.ClearActions()
}

// deleteStored deletes the stored DaemonSet behind the client's back, as
// another actor would: no request is recorded, and the cache still shows it.
func (fc *fakeCluster) deleteStored() {
	fc.t.Helper()
	if err := fc.client.Tracker().Delete(daemonSetsResource, Namespace, DaemonSetName); err != nil {
		fc.t.Fatalf("delete stored DaemonSet: %v", err)
	}
}

// replaceStored deletes the stored DaemonSet and creates a copy of ds in its
// place, as another actor would (a new UID and resourceVersion, no request
// recorded). It returns the created object; the cache is not synced.
func (fc *fakeCluster) replaceStored(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	fc.t.Helper()
	fc.deleteStored()
	ds = ds.DeepCopy()
	ds.ResourceVersion, ds.UID = "", "" // a create request carries neither
	created, err := fc.srv.Create(ds)
	if err != nil {
		fc.t.Fatalf("create replacement DaemonSet: %v", err)
	}
	return created
}

// failAll makes every request of verb on DaemonSets fail with err.
func (fc *fakeCluster) failAll(verb string, err error) {
	fc.client.PrependReactor(verb, "daemonsets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
}

// requests counts the recorded API requests: reads (get/list/watch) and
// writes (create/update/patch/delete), with the verbs in order.
type requests = fakeapi.Requests

func (fc *fakeCluster) requests() requests { return fc.srv.Count() }

// reasons returns the reasons of the recorded events, in order.
func (fc *fakeCluster) reasons() []string {
	var out []string
	for _, e := range fc.recorder.Events() {
		out = append(out, e.Reason)
	}
	return out
}
