package runtimeextractor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// Bridging a broken watch: in an API server outage and the reconnect backoff after it (up to a minute) the informer
// delivers nothing, so the DaemonSet is read live each second. A watch is broken when its call fails or it ends early
// or with an error event; it works again on an event or once open for establishGrace (a stale one fails at once).
const (
	probeInterval  = time.Second
	probeTimeout   = time.Second
	establishGrace = 2 * time.Second
)

// watchHealth follows the informer's list and watch calls.
type watchHealth struct {
	client kubernetes.Interface
	broken atomic.Bool
	wake   chan struct{}
	clk    atomic.Pointer[clock.WithTicker] // set when a controller adopts the informer, maybe running
}

func newWatchHealth(client kubernetes.Interface) *watchHealth {
	w := &watchHealth{client: client, wake: make(chan struct{}, 1)}
	w.setClock(clock.RealClock{})
	return w
}

func (w *watchHealth) setClock(c clock.WithTicker) { w.clk.Store(&c) }
func (w *watchHealth) clock() clock.WithTicker     { return *w.clk.Load() }

func (w *watchHealth) failed(err error) {
	if w.broken.CompareAndSwap(false, true) {
		klog.Infof("DaemonSet watch broken (%v): confirming the DaemonSet with live reads until it is back", err)
		notify(w.wake)
	}
}

func (w *watchHealth) established() {
	if w.broken.CompareAndSwap(true, false) {
		klog.Info("DaemonSet watch re-established")
	}
}

// instrument wraps a watch so its events tell watchHealth whether it works; a watch-list's listing goes to listed.
func (w *watchHealth) instrument(inner watch.Interface, opts metav1.ListOptions, listed func(*appsv1.DaemonSet)) watch.Interface {
	ow := &observedWatch{inner: inner, health: w, timeout: time.Duration(ptr.Deref(opts.TimeoutSeconds, 0)) * time.Second,
		out: make(chan watch.Event), stop: make(chan struct{}), done: make(chan struct{})}
	if ptr.Deref(opts.SendInitialEvents, false) {
		ow.listed = listed
	}
	go ow.run(w.clock())
	return ow
}

// observedWatch forwards a watch's events unchanged. Stop ends its goroutine and waits for it.
type observedWatch struct {
	inner      watch.Interface
	health     *watchHealth
	timeout    time.Duration           // asked of the server; 0 when none
	listed     func(*appsv1.DaemonSet) // nil unless a watch-list
	initial    *appsv1.DaemonSet       // what a watch-list's initial events showed
	out        chan watch.Event
	stop, done chan struct{} // closed by Stop, and when run returns
	once       sync.Once
}

func (w *observedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *observedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
	<-w.done
}

func (w *observedWatch) run(clk clock.WithTicker) {
	defer close(w.done)
	defer close(w.out) // a recovered panic ends the watch: the reflector watches anew
	defer recovered("a watch of the DaemonSet")
	start := clk.Now()
	grace := clk.NewTimer(establishGrace)
	defer grace.Stop()
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case <-grace.C():
			w.health.established()
		case e, ok := <-in:
			if !ok {
				select {
				case <-w.stop: // the consumer stopped it: says nothing about the connection
				default:
					w.ended(clk.Since(start))
				}
				return
			}
			switch {
			case e.Type == watch.Error:
				w.health.failed(fmt.Errorf("watch ended with an error: %w", apierrors.FromObject(e.Object)))
			case grace.Stop(): // the first event: the watch works
				w.health.established()
			}
			// A watch-list's initial events end with a bookmark: listed gets what they showed.
			switch {
			case w.listed == nil: // not a watch-list, or its list is over
			case e.Type == watch.Added:
				if ds, ok := e.Object.(*appsv1.DaemonSet); ok && ds.Name == resources.DaemonSetName {
					w.initial = ds
				}
			case e.Type == watch.Bookmark:
				if m, err := meta.Accessor(e.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					w.listed(w.initial)
					w.listed, w.initial = nil, nil // later events are changes, not the list
				}
			}
			select {
			case w.out <- e:
			case <-w.stop:
				return
			}
		}
	}
}

// bridgeBrokenWatch probes while the watch is broken, probes starting probeInterval apart.
func (ri *daemonSetInformer) bridgeBrokenWatch(ctx context.Context) {
	clk := ri.watch.clock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ri.watch.wake:
		}
		reached := false // the previous probe of this broken spell reached the server
		for ri.watch.broken.Load() {
			start := clk.Now()
			reached = ri.probe(ctx, !reached)
			select {
			case <-ctx.Done():
				return
			case <-clk.After(max(0, probeInterval-clk.Since(start))):
			}
		}
		ri.mu.Lock() // the watch is back: the cache is the view again
		ri.probing, ri.probed = false, nil
		ri.mu.Unlock()
	}
}

// probe reads the DaemonSet once, reports its difference from the view as the handlers would and whether it reached
// the server. After a gap the view may miss a DaemonSet created and deleted since, so finding none is reported.
func (ri *daemonSetInformer) probe(ctx context.Context, afterGap bool) bool {
	if !ri.informer.HasSynced() {
		return false // the controller is not acting yet: nothing to bridge
	}
	rctx, cancel := context.WithTimeout(ctx, probeTimeout)
	live, err := ri.watch.client.AppsV1().DaemonSets(resources.Namespace).Get(rctx, resources.DaemonSetName, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		klog.V(4).Infof("probe DaemonSet %s/%s: %v", resources.Namespace, resources.DaemonSetName, err)
		return false // still unreachable; the next probe tries again
	}
	ri.mu.Lock()
	prev := ri.cachedObject()
	if ri.probing {
		prev = ri.probed
	}
	if prev != nil && ri.gone[prev.UID] {
		prev = nil
	}
	ri.probing, ri.probed = true, live
	replaced := prev != nil && (live == nil || live.UID != prev.UID)
	if replaced {
		ri.markGoneLocked(prev.UID) // its delete event comes when the watch is back: already known
	}
	ri.mu.Unlock()
	if replaced {
		notify(ri.rollout)
		ri.drift(observation{Kind: DriftDeleted, UID: prev.UID, Generation: prev.Generation})
	}
	switch {
	case live == nil:
		if prev == nil && afterGap {
			ri.reportAbsent("")
		}
	case prev == nil || replaced:
		ri.onAdd(live, false)
	case live.ResourceVersion != prev.ResourceVersion:
		ri.onUpdate(prev, live)
	}
	return true
}

// ended: a watch that ends before its timeout lost its connection.
func (w *observedWatch) ended(lasted time.Duration) {
	if w.timeout > 0 && lasted >= w.timeout*9/10 {
		return // the server's timeout: the reflector watches again at once
	}
	w.health.failed(fmt.Errorf("watch ended after %s, before its timeout: connection lost", lasted.Round(time.Millisecond)))
}

// relisted gets what a re-list found, before the reflector replaces its cache, which says nothing of an object it never
// held (made and deleted while the watch was down): once synced, an empty list that deletes nothing is reported.
func (ri *daemonSetInformer) relisted(live *appsv1.DaemonSet) {
	if live != nil || ri.informer == nil || !ri.informer.HasSynced() {
		return
	}
	ri.mu.Lock()
	if cached := ri.cachedObject(); cached != nil && !ri.gone[cached.UID] {
		ri.mu.Unlock()
		return // the replace deletes it from the cache, and onDelete reports it
	}
	var uid types.UID
	if p := ri.probed; p != nil && !ri.gone[p.UID] {
		uid = p.UID // the newest object known, seen only by a probe
		ri.markGoneLocked(uid)
	}
	ri.probed = nil // the list is newer than the last probe
	ri.mu.Unlock()
	ri.reportAbsent(uid)
}

// reportAbsent: a live read found no DaemonSet, maybe gone unseen; uid is the last known, or "".
func (ri *daemonSetInformer) reportAbsent(uid types.UID) {
	klog.V(2).Infof("a live read found no DaemonSet %s/%s: the controller compares it with the desired state", resources.Namespace, resources.DaemonSetName)
	notify(ri.rollout)
	ri.drift(observation{Kind: DriftDeleted, UID: uid})
}
