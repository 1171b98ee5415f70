package runtimeextractor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
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
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// daemonSetInformer watches the managed DaemonSet alone and queues what changes for the loop. Its view (current, and
// the manager's lister) is the cache without the objects known gone; while the watch is broken, the latest live read.
type daemonSetInformer struct {
	informer cache.SharedIndexInformer
	lister   viewLister    // the view; its DaemonSetLister is the informer cache as it is
	modified chan struct{} // drift, coalesced
	rollout  chan struct{} // status or generation moved, coalesced
	watch    *watchHealth  // nil when the factory already had a DaemonSet informer, not instrumented

	mu      sync.Mutex
	queued  []observation      // drift seen since the controller last drained it
	gone    map[types.UID]bool // deleted objects the cache may still hold
	probing bool               // a live read stands in for the cache while the watch is broken
	probed  *appsv1.DaemonSet  // its latest result: nil when it found none, and when not probing
}

// NewResourceInformer creates an informer, in kubeInformers, of the managed DaemonSet alone that notifies when someone
// else modifies it. Start the factory and Run the result; eventRecorder is unused (it keeps the seed's signature).
func NewResourceInformer(eventRecorder events.Recorder, kubeInformers informers.SharedInformerFactory) (*daemonSetInformer, error) {
	ri := &daemonSetInformer{modified: make(chan struct{}, 1), rollout: make(chan struct{}, 1), gone: map[types.UID]bool{}}
	ri.informer = kubeInformers.InformerFor(&appsv1.DaemonSet{}, ri.newInformer)
	if ri.watch == nil {
		klog.Warningf("the informer factory already has a DaemonSet informer; a broken watch will not be bridged by live reads")
	}
	ri.lister = viewLister{DaemonSetLister: appslisters.NewDaemonSetLister(ri.informer.GetIndexer()), ri: ri}
	handlers := cache.ResourceEventHandlerDetailedFuncs{AddFunc: ri.onAdd, UpdateFunc: ri.onUpdate, DeleteFunc: ri.onDelete}
	if _, err := ri.informer.AddEventHandler(handlers); err != nil {
		return nil, fmt.Errorf("watch daemonset %s/%s: %w", resources.Namespace, resources.DaemonSetName, err)
	}
	return ri, nil
}

// newInformer builds the factory's DaemonSet informer: list and watch report to watchHealth, re-lists to relisted.
func (ri *daemonSetInformer) newInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	ri.watch = newWatchHealth(client)
	selector := fields.OneTermEqualSelector("metadata.name", resources.DaemonSetName).String()
	daemonSets := client.AppsV1().DaemonSets(resources.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			list, err := daemonSets.List(ctx, o)
			if err != nil {
				ri.watch.failed(err)
				return nil, err // unwrapped: the reflector classifies it (io.EOF, 410, ...)
			}
			var live *appsv1.DaemonSet
			if i := slices.IndexFunc(list.Items, func(ds appsv1.DaemonSet) bool { return ds.Name == resources.DaemonSetName }); i >= 0 {
				live = &list.Items[i]
			}
			ri.relisted(live)
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := daemonSets.Watch(ctx, o)
			if err != nil {
				ri.watch.failed(err)
				return nil, err // unwrapped: the reflector classifies it (connection refused, 429, ...)
			}
			return ri.watch.instrument(w, o, ri.relisted), nil
		},
	}
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &appsv1.DaemonSet{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// A failed list comes here; the wrapped watch tells of an ended watch. It errs only on a started informer, not this.
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		ri.watch.failed(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return informer
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

// ResourceModified is notified, coalesced, when the DaemonSet changes.
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

func (ri *daemonSetInformer) onAdd(obj any, isInInitialList bool) {
	defer recovered("the informer's event handler")
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != resources.DaemonSetName {
		return
	}
	notify(ri.rollout)
	// A first sight at startup is no drift; later the drain decides whose an Add is (a re-list can fold a removal in).
	if !isInInitialList {
		ri.drift(observed(DriftModified, nil, ds, ownedMetadataMissing(ds)))
	}
}

func (ri *daemonSetInformer) onUpdate(oldObj, newObj any) {
	defer recovered("the informer's event handler")
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 || cur.Name != resources.DaemonSetName {
		return
	}
	if cur.UID != old.UID { // a re-list replaced the object: the old one will get no delete event
		ri.mu.Lock()
		delete(ri.gone, old.UID)
		ri.mu.Unlock()
	}
	// The drift first, so the loop it wakes repairs before it looks at the rollout; whose a change is, the drain decides.
	damaged := ownedMetadataDamaged(old, cur)
	switch {
	case cur.UID != old.UID || cur.Generation != old.Generation:
		ri.drift(observed(DriftModified, old, cur, damaged))
	case damaged:
		ri.drift(observed(DriftMetadata, old, cur, false))
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

const maxGone = 8 // bounds the gone set: an object the cache never held gets no delete event

func (ri *daemonSetInformer) markGoneLocked(uid types.UID) {
	if len(ri.gone) >= maxGone {
		cached := ri.cachedObject()
		maps.DeleteFunc(ri.gone, func(u types.UID, _ bool) bool { return cached == nil || cached.UID != u })
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

// shownLocked: the DaemonSet shown, gone or not (the live read while the watch is broken); ri.mu held.
func (ri *daemonSetInformer) shownLocked() *appsv1.DaemonSet {
	if ri.probing && ri.watch.broken.Load() {
		return ri.probed
	}
	return ri.cachedObject()
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

func (ri *daemonSetInformer) cachedObject() *appsv1.DaemonSet {
	ds, _ := ri.lister.DaemonSetLister.DaemonSets(resources.Namespace).Get(resources.DaemonSetName)
	return ds
}

// viewLister is the manager's lister: the view for the managed DaemonSet, else the cache.
type viewLister struct {
	appslisters.DaemonSetLister
	ri *daemonSetInformer
}

func (v viewLister) DaemonSets(namespace string) appslisters.DaemonSetNamespaceLister {
	return viewNamespaceLister{DaemonSetNamespaceLister: v.DaemonSetLister.DaemonSets(namespace), ri: v.ri, namespace: namespace}
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
