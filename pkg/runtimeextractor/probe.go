package runtimeextractor

import (
	"context"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// Bridging a broken watch. While kube-apiserver is unreachable, client-go's
// reflector backs off (0.8 s doubling to 30 s), so after an outage its watch can
// stay down for many seconds more, and a change made meanwhile would wait for
// it. While the watch is broken, the informer confirms the managed DaemonSet with
// a bounded live GET about once a second and feeds what it finds into the normal
// drift path; the first successful watch call ends that. A healthy watch costs
// no request at all.
const (
	probeInterval = time.Second
	probeTimeout  = time.Second
)

// watchHealth follows the informer's list and watch calls.
type watchHealth struct {
	client kubernetes.Interface
	broken atomic.Bool
	wake   chan struct{}
}

func newWatchHealth(client kubernetes.Interface) *watchHealth {
	return &watchHealth{client: client, wake: make(chan struct{}, 1)}
}

// failed: a list or watch call failed, or a watch ended with an error.
func (w *watchHealth) failed(err error) {
	if w.broken.CompareAndSwap(false, true) {
		klog.Infof("DaemonSet watch broken (%v): confirming the DaemonSet with live reads until it is back", err)
		notify(w.wake)
	}
}

// established: a watch call succeeded; the informer sees changes again.
func (w *watchHealth) established() {
	if w.broken.CompareAndSwap(true, false) {
		klog.Info("DaemonSet watch re-established")
	}
}

// probedDaemonSet is what a live read found; ds is nil when there was none.
type probedDaemonSet struct{ ds *appsv1.DaemonSet }

// bridgeBrokenWatch probes while the watch is broken, until ctx is done.
func (ri *daemonSetInformer) bridgeBrokenWatch(ctx context.Context) {
	timer := time.NewTimer(probeInterval)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ri.watch.wake:
		}
		for ri.watch.broken.Load() {
			ri.probe(ctx)
			timer.Reset(probeInterval)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		// The watch is back: the cache (which resumes from where it stopped,
		// or relists) is the view again.
		ri.mu.Lock()
		ri.probed = nil
		ri.mu.Unlock()
	}
}

// probe reads the DaemonSet from the API server once and reports the difference
// from the view as the informer's handlers would have. Before the first sync
// there is nothing to bridge: the controller is not acting yet.
func (ri *daemonSetInformer) probe(ctx context.Context) {
	if !ri.informer.HasSynced() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, probeTimeout)
	live, err := ri.watch.client.AppsV1().DaemonSets(resources.Namespace).Get(rctx, resources.DaemonSetName, metav1.GetOptions{})
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		klog.V(4).Infof("probe DaemonSet: %v", err)
		return // still unreachable; the next probe tries again
	}

	ri.mu.Lock()
	var prev *appsv1.DaemonSet
	if ri.probed != nil {
		prev = ri.probed.ds
	} else {
		_, prev, _ = ri.cachedObject()
	}
	if prev != nil && ri.gone[prev.UID] {
		prev = nil
	}
	ri.probed = &probedDaemonSet{ds: live}
	if prev != nil && (live == nil || live.UID != prev.UID) {
		// Its delete event will come when the watch is back: already known.
		ri.markGoneLocked(prev.UID)
	}
	ri.mu.Unlock()
	ri.observeProbe(prev, live)
}

// observeProbe feeds the change from prev to live into the drift path.
func (ri *daemonSetInformer) observeProbe(prev, live *appsv1.DaemonSet) {
	switch {
	case prev == nil && live == nil:
	case prev == nil:
		ri.onAdd(live, false)
	case live == nil || live.UID != prev.UID:
		notify(ri.rollout)
		ri.drift(observation{kind: DriftDeleted, uid: prev.UID, generation: prev.Generation})
		if live != nil {
			ri.onAdd(live, false)
		}
	case live.ResourceVersion != prev.ResourceVersion:
		ri.onUpdate(prev, live)
	}
}
