package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// floorUserAgent marks the ideal watcher's requests in the audit log: it runs
// as the controller's ServiceAccount, so that both authenticate and are
// authorized alike, but its requests are not the controller's.
const floorUserAgent = "bench-ideal-watcher"

// floorClient is the ideal watcher's client: the controller's kubeconfig,
// client-go's defaults, its own user agent.
func floorClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("floor client: %w", err)
	}
	cfg.UserAgent = floorUserAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("floor client: %w", err)
	}
	return kube, nil
}

// idealWatcher is the floor the controller's reaction to a deletion is
// measured against: one client-go watch on the DaemonSet that, when it sees
// the deletion, creates the same object again at once, and does nothing else
// (no cache, no queue, no status, no Events).
type idealWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error // the first failure, reported by check
}

func startIdealWatcher(ctx context.Context, kube kubernetes.Interface) (*idealWatcher, error) {
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := kube.AppsV1().DaemonSets(ns).List(ctx, byName)
	if err != nil {
		return nil, fmt.Errorf("ideal watcher: list: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	byName.ResourceVersion = list.ResourceVersion
	// Watch returns once the API server has answered with the stream's
	// headers, that is, with the watch registered: no deletion sent after
	// this reaches it late.
	w, err := kube.AppsV1().DaemonSets(ns).Watch(wctx, byName)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("ideal watcher: watch: %w", err)
	}
	iw := &idealWatcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(iw.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				old, ok := ev.Object.(*appsv1.DaemonSet)
				if !ok {
					continue
				}
				if _, err := kube.AppsV1().DaemonSets(ns).Create(wctx, recreated(old), metav1.CreateOptions{}); err != nil && wctx.Err() == nil {
					iw.fail(fmt.Errorf("ideal watcher: create: %w", err))
				}
			case watch.Error:
				iw.fail(fmt.Errorf("ideal watcher: watch error: %v", ev.Object))
			}
		}
		if wctx.Err() == nil {
			iw.fail(errors.New("ideal watcher: the watch ended"))
		}
	}()
	return iw, nil
}

// recreated is the deleted object as a new one: what the user set, without
// what the API server assigned (UID, resourceVersion, timestamps, status).
func recreated(old *appsv1.DaemonSet) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: old.Namespace, Name: old.Name,
			Labels: old.Labels, Annotations: old.Annotations,
			OwnerReferences: old.OwnerReferences,
		},
		Spec: old.Spec,
	}
}

func (iw *idealWatcher) fail(err error) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.err == nil {
		iw.err = err
	}
}

// check returns the first failure so far.
func (iw *idealWatcher) check() error {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	return iw.err
}

// stop ends the watch; it returns when the watcher's goroutine has.
func (iw *idealWatcher) stop() {
	iw.cancel()
	<-iw.done
}
