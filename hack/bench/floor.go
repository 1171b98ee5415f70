package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/insights-runtime-extractor/controller/pkg/testcluster"
)

// The ideal watcher is the floor the controller's reaction to a deletion, or
// to an image change, is measured against: one client-go watch on the
// DaemonSet that, when it sees the deletion, creates the same object again at
// once, and when it sees another container image, puts the pod template it
// last saw created back with one update (after a lost race, a read and
// another at once); it does nothing else (no cache, no queue, no status, no
// Events).
//
// It runs as a process of its own, as the controller does: the bench's binary
// started again with -ideal-watcher. Inside the bench's process it would
// react on threads that the bench's own delete call had just woken, a head
// start of about a millisecond that no controller process has.

// idealWatcherFlag starts the bench's binary as the ideal watcher, with the
// kubeconfig it is to use.
const idealWatcherFlag = "ideal-watcher"

// watchingLine is what the ideal watcher prints once its watch is registered.
const watchingLine = "ideal watcher: watching"

// floorUserAgent marks the ideal watcher's requests in the audit log: it runs
// as the controller's ServiceAccount, so that both authenticate and are
// authorized alike, but its requests are not the controller's.
const floorUserAgent = "bench-ideal-watcher"

// idealWatcher is the running ideal watcher process.
type idealWatcher struct{ proc *testcluster.Command }

// startIdealWatcher starts the ideal watcher with the controller's kubeconfig
// and returns once its watch is registered; its log is
// <logDir>/ideal-watcher-<label>.log.
func startIdealWatcher(ctx context.Context, kubeconfig, logDir, label string) (*idealWatcher, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("ideal watcher: find the bench's binary: %w", err)
	}
	proc, err := testcluster.StartCommand("ideal-watcher-"+label, self, logDir, "-"+idealWatcherFlag, kubeconfig)
	if err != nil {
		return nil, err
	}
	iw := &idealWatcher{proc: proc}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		out, err := os.ReadFile(proc.Log())
		return bytes.Contains(out, []byte(watchingLine)), err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("ideal watcher: wait for its watch: %w", err), iw.stop())
	}
	return iw, nil
}

// stop ends the ideal watcher; it returns its failure (it exits on the first),
// if it had failed.
func (iw *idealWatcher) stop() error { return iw.proc.Stop() }

// runIdealWatcher is the ideal watcher process: it lists and watches the
// DaemonSet with the controller's credentials and client-go's defaults, and
// recreates it whenever it sees it deleted, until ctx ends. Any failure ends it.
func runIdealWatcher(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("ideal watcher: %w", err)
	}
	cfg.UserAgent = floorUserAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("ideal watcher: %w", err)
	}
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := kube.AppsV1().DaemonSets(ns).List(ctx, byName)
	if err != nil {
		return fmt.Errorf("ideal watcher: list: %w", err)
	}
	byName.ResourceVersion = list.ResourceVersion
	// want is the pod template to keep: the one listed, or last created.
	var want *corev1.PodTemplateSpec
	if len(list.Items) == 1 {
		want = list.Items[0].Spec.Template.DeepCopy()
	}
	// Watch returns once the API server has answered with the stream's
	// headers, that is, with the watch registered: no deletion sent after
	// this reaches it late.
	w, err := kube.AppsV1().DaemonSets(ns).Watch(ctx, byName)
	if err != nil {
		return fmt.Errorf("ideal watcher: watch: %w", err)
	}
	defer w.Stop()
	fmt.Println(watchingLine)
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			if ds, ok := ev.Object.(*appsv1.DaemonSet); ok {
				want = ds.Spec.Template.DeepCopy()
			}
		case watch.Modified:
			ds, ok := ev.Object.(*appsv1.DaemonSet)
			if !ok || want == nil || slices.Equal(images(ds.Spec.Template), images(*want)) {
				continue
			}
			if err := restoreTemplate(ctx, kube, ds, want); err != nil && ctx.Err() == nil {
				return fmt.Errorf("ideal watcher: update: %w", err)
			}
		case watch.Deleted:
			old, ok := ev.Object.(*appsv1.DaemonSet)
			if !ok {
				continue
			}
			if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx, recreated(old), metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				return fmt.Errorf("ideal watcher: create: %w", err)
			}
		case watch.Error:
			if ctx.Err() != nil {
				return nil // stopped: the watch reports its own cancellation
			}
			return fmt.Errorf("ideal watcher: watch error: %v", ev.Object)
		}
	}
	if ctx.Err() == nil {
		return errors.New("ideal watcher: the watch ended")
	}
	return nil
}

// restoreTemplate puts the pod template want back on ds with one update. One
// that loses a race (the DaemonSet controller's status update of the change
// it restores, usually) reads the object again and updates at once, with no
// backoff: the least any correct watcher does.
func restoreTemplate(ctx context.Context, kube kubernetes.Interface, ds *appsv1.DaemonSet, want *corev1.PodTemplateSpec) error {
	for attempt := 1; ; attempt++ {
		ds.Spec.Template = *want.DeepCopy()
		_, err := kube.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) || attempt == 5 {
			return err
		}
		if ds, err = kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("read after a conflict: %w", err)
		}
	}
}

// images are the template's container images, in order.
func images(t corev1.PodTemplateSpec) []string {
	out := make([]string, len(t.Spec.Containers))
	for i, c := range t.Spec.Containers {
		out[i] = c.Image
	}
	return out
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
