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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// DriftKind classifies an external change of the managed DaemonSet.
type DriftKind string

// The drift kinds (the values of the drift_events_total metric's kind label).
const (
	// DriftModified: the spec changed (metadata.generation moved) or the object appeared.
	DriftModified DriftKind = "modified"
	// DriftDeleted: the object was deleted.
	DriftDeleted DriftKind = "deleted"
	// DriftMetadata: an owned label or annotation was removed or changed; the
	// generation does not move for those, so the generation filter alone misses them.
	DriftMetadata DriftKind = "metadata"
)

// daemonSetInformer watches the managed DaemonSet, and only it, and tells the
// controller about external changes (ResourceModified) and rollout progress.
type daemonSetInformer struct {
	factory.Controller

	informer cache.SharedIndexInformer
	lister   appslisters.DaemonSetLister
	syncCtx  factory.SyncContext

	modified chan struct{} // drift, coalesced
	rollout  chan struct{} // status or generation moved, coalesced

	// ownWrite tells the controller's own writes apart (set by the controller).
	ownWrite atomic.Pointer[func(types.UID, int64) bool]

	mu      sync.Mutex
	pending []observation // drift seen since the controller last drained it
}

// observation is one candidate drift. The event-time own-write check can lose a
// race (the watch event may arrive before the writer recorded its write), so the
// controller checks UID and generation again when it drains, after its own
// apply has returned.
type observation struct {
	kind       DriftKind
	uid        types.UID
	generation int64
}

var _ ResourceInformer = (*daemonSetInformer)(nil)

// NewResourceInformer creates a new informer that watches runtime-extractor
// resources and notifies when they are modified by external actors (not by this
// controller).
//
// It registers, in kubeInformers, a DaemonSet informer restricted by field
// selector to the managed DaemonSet in openshift-insights, so the cache holds one
// object however many other DaemonSets the namespace has. (A SharedInformerFactory
// keeps one informer per type: other users of the same factory's DaemonSet
// informer see the same restricted cache.) Start the factory and Run the returned
// controller, as the Usage section shows.
func NewResourceInformer(eventRecorder events.Recorder, kubeInformers informers.SharedInformerFactory) (*daemonSetInformer, error) {
	informer := kubeInformers.InformerFor(&appsv1.DaemonSet{}, newManagedDaemonSetInformer)
	ri := &daemonSetInformer{
		informer: informer,
		lister:   appslisters.NewDaemonSetLister(informer.GetIndexer()),
		syncCtx:  factory.NewSyncContext("RuntimeExtractorResourceInformer", eventRecorder),
		modified: make(chan struct{}, 1),
		rollout:  make(chan struct{}, 1),
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    ri.onAdd,
		UpdateFunc: ri.onUpdate,
		DeleteFunc: ri.onDelete,
	}); err != nil {
		return nil, fmt.Errorf("watch daemonset %s/%s: %w", resources.Namespace, resources.DaemonSetName, err)
	}
	ri.Controller = factory.New().
		WithSyncContext(ri.syncCtx).
		WithBareInformers(informer).
		WithSync(ri.sync).
		ToController("RuntimeExtractorResourceInformer", eventRecorder)
	return ri, nil
}

func newManagedDaemonSetInformer(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return appsinformers.NewFilteredDaemonSetInformer(client, resources.Namespace, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", resources.DaemonSetName).String()
		})
}

// Run runs the library-go controller that delivers drift notifications. It
// also shuts the queue down itself: library-go skips that when ctx ends before
// the caches synced, which would leak the queue's goroutine.
func (ri *daemonSetInformer) Run(ctx context.Context, workers int) {
	defer ri.syncCtx.Queue().ShutDown()
	ri.Controller.Run(ctx, workers)
}

// ResourceModified returns a channel that receives a notification when the
// DaemonSet is modified or deleted by someone else. Notifications coalesce.
func (ri *daemonSetInformer) ResourceModified() <-chan struct{} { return ri.modified }

// sync runs on the library-go controller's worker: it turns queued drift into one
// non-blocking notification.
func (ri *daemonSetInformer) sync(context.Context, factory.SyncContext) error {
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
	return f != nil && (*f)(ds.UID, ds.Generation)
}

func (ri *daemonSetInformer) onAdd(obj any, isInInitialList bool) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != resources.DaemonSetName {
		return
	}
	notify(ri.rollout)
	// Objects present at startup are the controller's first observation, not
	// drift; a later Add it did not write (someone recreated it) is.
	if !isInInitialList && !ri.isOwnWrite(ds) {
		ri.drift(observation{DriftModified, ds.UID, ds.Generation})
	}
}

func (ri *daemonSetInformer) onUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := newObj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 || cur.Name != resources.DaemonSetName {
		return
	}
	if cur.Generation != old.Generation || !apiequality.Semantic.DeepEqual(cur.Status, old.Status) {
		notify(ri.rollout)
	}
	if kind, drifted := classifyUpdate(old, cur, ri.isOwnWrite(cur)); drifted {
		ri.drift(observation{kind, cur.UID, cur.Generation})
	}
}

// classifyUpdate decides whether an update is someone else's change. Status-only
// updates keep the generation and the owned metadata, and are ignored; so are
// the controller's own writes (own is true for them).
func classifyUpdate(old, cur *appsv1.DaemonSet, own bool) (DriftKind, bool) {
	if old.UID != cur.UID || cur.Generation != old.Generation {
		if own {
			return "", false
		}
		return DriftModified, true
	}
	if ownedMetadataDamaged(old, cur) {
		return DriftMetadata, true
	}
	return "", false
}

// ownedMetadataDamaged: an ownership label that is no longer right, or an owned
// annotation that was there and is now gone or different. The controller only
// ever sets them, so such a change is never its own.
func ownedMetadataDamaged(old, cur *appsv1.DaemonSet) bool {
	for k, v := range resources.OwnedLabels() {
		if old.Labels[k] == v && cur.Labels[k] != v {
			return true
		}
	}
	for _, k := range []string{resources.VersionAnnotation, specHashAnnotation} {
		if v, had := old.Annotations[k]; had && cur.Annotations[k] != v {
			return true
		}
	}
	return false
}

// specHashAnnotation is the annotation library-go's resourceapply records the
// desired spec's hash in.
const specHashAnnotation = "operator.openshift.io/spec-hash"

func (ri *daemonSetInformer) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Name != resources.DaemonSetName {
		return
	}
	notify(ri.rollout)
	ri.drift(observation{DriftDeleted, ds.UID, ds.Generation})
}

func (ri *daemonSetInformer) drift(o observation) {
	ri.mu.Lock()
	ri.pending = append(ri.pending, o)
	ri.mu.Unlock()
	ri.syncCtx.Queue().Add(factory.DefaultQueueKey)
}

// drainDrift returns and forgets the drift seen since the last call.
func (ri *daemonSetInformer) drainDrift() []observation {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	out := ri.pending
	ri.pending = nil
	return out
}

// current returns the managed DaemonSet from the cache.
func (ri *daemonSetInformer) current() (*appsv1.DaemonSet, bool) {
	ds, err := ri.lister.DaemonSets(resources.Namespace).Get(resources.DaemonSetName)
	if err != nil {
		return nil, false
	}
	return ds, true
}
