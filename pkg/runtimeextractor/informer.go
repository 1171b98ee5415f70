package runtimeextractor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openshift/library-go/pkg/controller/factory"
	"github.com/openshift/library-go/pkg/operator/events"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appsclientv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// daemonSetInformer watches the managed DaemonSet alone and tells the
// controller of external changes and rollout progress. Its view (current, and
// the lister the resource manager reads) is the cache without the objects
// known to be gone; while the watch is broken, the latest live read stands in.
type daemonSetInformer struct {
	informer cache.SharedIndexInformer
	cached   appslisters.DaemonSetLister // the informer cache as it is
	lister   appslisters.DaemonSetLister // the view

	modified chan struct{} // drift, coalesced
	rollout  chan struct{} // status or generation moved, coalesced

	// ownWrite tells the controller's own writes apart (set by the controller).
	ownWrite atomic.Pointer[func(*appsv1.DaemonSet) bool]

	// watch tracks the health of the informer's watch; nil when the factory
	// already had a DaemonSet informer that this one could not instrument.
	watch *watchHealth

	mu     sync.Mutex
	queued []observation      // drift seen since the controller last drained it
	gone   map[types.UID]bool // deleted objects the cache may still hold
	probed *probedDaemonSet   // latest live read while the watch is broken
}

var _ ResourceInformer = (*daemonSetInformer)(nil)

// NewResourceInformer creates an informer that notifies when someone other
// than this controller modifies the runtime-extractor resources. It registers
// in kubeInformers a DaemonSet informer restricted to the managed DaemonSet by
// field selector; a factory keeps one informer per type, so other users of its
// DaemonSet informer see the same restricted cache. Start the factory and Run
// the returned controller. Its handlers queue what they see for the control
// loop: it has no work queue of its own, so eventRecorder is unused (it stays
// for the seed's signature).
func NewResourceInformer(eventRecorder events.Recorder, kubeInformers informers.SharedInformerFactory) (*daemonSetInformer, error) {
	ri := &daemonSetInformer{
		modified: make(chan struct{}, 1),
		rollout:  make(chan struct{}, 1),
		gone:     map[types.UID]bool{},
	}
	informer := kubeInformers.InformerFor(&appsv1.DaemonSet{}, ri.newInformer)
	if ri.watch == nil {
		klog.Warningf("the informer factory already has a DaemonSet informer; a broken watch will not be bridged by live reads")
	}
	ri.informer = informer
	ri.cached = appslisters.NewDaemonSetLister(informer.GetIndexer())
	ri.lister = viewLister{DaemonSetLister: ri.cached, ri: ri}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    ri.onAdd,
		UpdateFunc: ri.onUpdate,
		DeleteFunc: ri.onDelete,
	}); err != nil {
		return nil, fmt.Errorf("watch daemonset %s/%s: %w", resources.Namespace, resources.DaemonSetName, err)
	}
	return ri, nil
}

// newInformer builds the factory's DaemonSet informer: the list and watch
// calls and the watch's events report to watchHealth, and every re-list is
// checked for a DaemonSet gone unseen (relisted).
func (ri *daemonSetInformer) newInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	ri.watch = newWatchHealth(client)
	selector := fields.OneTermEqualSelector("metadata.name", resources.DaemonSetName).String()
	daemonSets := func() appsclientv1.DaemonSetInterface { return client.AppsV1().DaemonSets(resources.Namespace) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list, err := daemonSets().List(ctx, o)
			if err != nil {
				ri.watch.failed(err)
				return nil, err // unwrapped: the reflector classifies it (io.EOF, 410, ...)
			}
			ri.relisted(managedIn(list))
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := daemonSets().Watch(ctx, o)
			if err != nil {
				ri.watch.failed(err)
				return nil, err // unwrapped: the reflector classifies it (connection refused, 429, ...)
			}
			return ri.watch.instrument(w, o, ri.relisted), nil
		},
	}
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &appsv1.DaemonSet{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// A failed list comes here; the wrapped watch tells of an ended watch.
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		ri.watch.failed(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		klog.Warningf("watch error handler: %v", err) // only on a started informer, which this is not
	}
	return informer
}

func managedIn(list *appsv1.DaemonSetList) *appsv1.DaemonSet {
	for i := range list.Items {
		if list.Items[i].Name == resources.DaemonSetName {
			return &list.Items[i]
		}
	}
	return nil
}

// Name is the informer's name as a library-go controller.
func (ri *daemonSetInformer) Name() string { return "RuntimeExtractorResourceInformer" }

// Run runs the broken-watch bridge, and returns when ctx ends; workers is unused.
func (ri *daemonSetInformer) Run(ctx context.Context, _ int) {
	if ri.watch != nil {
		func() { defer recovered("the broken-watch bridge"); ri.bridgeBrokenWatch(ctx) }()
	}
	<-ctx.Done()
}

// ResourceModified is notified, coalesced, when someone else modifies or
// deletes the DaemonSet.
func (ri *daemonSetInformer) ResourceModified() <-chan struct{} { return ri.modified }

// Sync serves library-go's Sync, which a host may call.
func (ri *daemonSetInformer) Sync(context.Context, factory.SyncContext) error {
	notify(ri.modified)
	return nil
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // one notification is pending already; the reader reads the latest state
	}
}

func (ri *daemonSetInformer) isOwnWrite(ds *appsv1.DaemonSet) bool {
	f := ri.ownWrite.Load()
	return f != nil && (*f)(ds)
}

func (ri *daemonSetInformer) onAdd(obj any, isInInitialList bool) {
	defer recovered("the informer's event handler")
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != resources.DaemonSetName {
		return
	}
	notify(ri.rollout)
	// Objects present at startup are the first observation, not drift; a
	// later Add it did not write is. So is its own object lacking owned
	// metadata: a re-list can fold someone's removal into the first sight.
	switch {
	case isInInitialList:
	case !ri.isOwnWrite(ds):
		ri.drift(observation{Kind: DriftModified, UID: ds.UID, Generation: ds.Generation, Edits: changedBy(nil, ds), Likely: newestOtherManager(ds)})
	case ownedMetadataMissing(ds):
		ri.drift(observation{Kind: DriftMetadata, UID: ds.UID, Generation: ds.Generation, Meta: resources.OwnedMetadata(ds), Version: ds.ResourceVersion,
			Edits: changedBy(nil, ds), Likely: newestOtherManager(ds)})
	}
}

func (ri *daemonSetInformer) onUpdate(oldObj, newObj any) {
	defer recovered("the informer's event handler")
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 || cur.Name != resources.DaemonSetName {
		return
	}
	if cur.UID != old.UID {
		// A re-list replaced the object: the old one will get no delete event.
		ri.mu.Lock()
		delete(ri.gone, old.UID)
		ri.mu.Unlock()
	}
	// The drift first, so the loop it wakes repairs before it looks at the rollout.
	if kind, drifted := classifyUpdate(old, cur, ri.isOwnWrite(cur)); drifted {
		ri.drift(observation{Kind: kind, UID: cur.UID, Generation: cur.Generation, Meta: resources.OwnedMetadata(cur), Version: cur.ResourceVersion,
			Edits: changedBy(old, cur), Likely: newestOtherManager(cur)})
	}
	if cur.UID != old.UID || cur.Generation != old.Generation || !apiequality.Semantic.DeepEqual(cur.Status, old.Status) {
		notify(ri.rollout)
	}
}

func (ri *daemonSetInformer) onDelete(obj any) {
	defer recovered("the informer's event handler")
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != resources.DaemonSetName {
		return
	}
	ri.mu.Lock()
	expected := ri.gone[ds.UID]
	delete(ri.gone, ds.UID) // the cache has caught up
	ri.mu.Unlock()
	ri.drift(observation{Kind: DriftDeleted, UID: ds.UID, Generation: ds.Generation, Expected: expected})
	notify(ri.rollout) // after the drift, as in onUpdate
}

func (ri *daemonSetInformer) drift(o observation) {
	ri.mu.Lock()
	ri.queued = append(ri.queued, o)
	ri.mu.Unlock()
	notify(ri.modified) // at once, from the handler: the repair's write comes first
}

func (ri *daemonSetInformer) drainDrift() []observation {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	out := ri.queued
	ri.queued = nil
	return out
}

func (ri *daemonSetInformer) driftQueued() bool {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	return len(ri.queued) > 0
}

// markGone hides uid from the view until the cache drops it too (onDelete).
func (ri *daemonSetInformer) markGone(uid types.UID) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	ri.markGoneLocked(uid)
}

// maxGone bounds the gone set: an object the cache never held never gets a
// delete event to forget it by.
const maxGone = 8

func (ri *daemonSetInformer) markGoneLocked(uid types.UID) {
	if len(ri.gone) >= maxGone {
		_, cached, _ := ri.cachedObject()
		for u := range ri.gone {
			if cached == nil || cached.UID != u {
				delete(ri.gone, u)
			}
		}
	}
	ri.gone[uid] = true
}

func (ri *daemonSetInformer) current() (*appsv1.DaemonSet, bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	ds := ri.shownLocked()
	if ds == nil || ri.gone[ds.UID] {
		return nil, false
	}
	return ds, true
}

// shownLocked is the DaemonSet the cluster shows, gone or not: the live read
// while the watch is broken, else the cache; ri.mu is held. A watch that works
// again makes the cache the view at once: it delivers its first event only
// after saying it works, and the bridge forgets its read only after its wait.
func (ri *daemonSetInformer) shownLocked() *appsv1.DaemonSet {
	if ri.probed != nil && ri.watch.broken.Load() {
		return ri.probed.ds
	}
	_, ds, _ := ri.cachedObject()
	return ds
}

// terminating: whether the DaemonSet shown is being deleted, and its finalizers.
func (ri *daemonSetInformer) terminating() (finalizers []string, ok bool) {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	ds := ri.shownLocked()
	if ds == nil || ds.DeletionTimestamp == nil {
		return nil, false
	}
	for _, f := range ds.Finalizers {
		finalizers = append(finalizers, resources.PrintableName(f)) // a client's choice
	}
	return finalizers, true
}

// cachedObject: ds is nil when the cache has none.
func (ri *daemonSetInformer) cachedObject() (bool, *appsv1.DaemonSet, error) {
	ds, err := ri.cached.DaemonSets(resources.Namespace).Get(resources.DaemonSetName)
	if apierrors.IsNotFound(err) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return true, ds, nil
}

// viewLister is the lister the resource manager reads: the view for the
// managed DaemonSet, the cache for anything else.
type viewLister struct {
	appslisters.DaemonSetLister
	ri *daemonSetInformer
}

func (v viewLister) DaemonSets(namespace string) appslisters.DaemonSetNamespaceLister {
	return viewNamespaceLister{DaemonSetNamespaceLister: v.ri.cached.DaemonSets(namespace), ri: v.ri, namespace: namespace}
}

type viewNamespaceLister struct {
	appslisters.DaemonSetNamespaceLister
	ri        *daemonSetInformer
	namespace string
}

func (v viewNamespaceLister) Get(name string) (*appsv1.DaemonSet, error) {
	if v.namespace != resources.Namespace || name != resources.DaemonSetName {
		return v.DaemonSetNamespaceLister.Get(name)
	}
	if ds, ok := v.ri.current(); ok {
		return ds, nil
	}
	return nil, apierrors.NewNotFound(appsv1.Resource("daemonsets"), name)
}
