package testcluster

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// The runtime extractor DaemonSet as the e2e tests and the bench see it.

// ExtractorImage is the image of ds's extractor container, "" when it has none.
func ExtractorImage(ds *appsv1.DaemonSet) string {
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == resources.ContainerExtractor {
			return c.Image
		}
	}
	return ""
}

// ReadDaemonSet reads the DaemonSet manifest at path, strictly: a misspelt
// field is an error, not a silently dropped setting.
func ReadDaemonSet(path string) (*appsv1.DaemonSet, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err // it names the path
	}
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(raw, ds); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ds, nil
}

// DeleteAndAwaitRecreation is for right after an API server outage: it
// deletes the DaemonSet ns/name, the one with UID old, and waits up to
// timeout for a new one of the name, seen by a watch opened before the
// deletion. It returns the new DaemonSet, when the deletion returned (zero if
// it did not happen), and when the watch delivered the new one.
//
// It first lists the DaemonSet until that succeeds, for up to 30 s: the API
// server answers /readyz while kube's client may still have to notice that
// its connection is gone.
func DeleteAndAwaitRecreation(ctx context.Context, kube kubernetes.Interface, ns, name string, old types.UID, timeout time.Duration) (recreated *appsv1.DaemonSet, deleted, seen time.Time, err error) {
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	var list *appsv1.DaemonSetList
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		list, err = kube.AppsV1().DaemonSets(ns).List(ctx, byName)
		return err == nil, nil
	})
	if err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("list the DaemonSet after the outage: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	byName.ResourceVersion = list.ResourceVersion
	w, err := kube.AppsV1().DaemonSets(ns).Watch(wctx, byName)
	if err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("watch the DaemonSet: %w", err)
	}
	defer w.Stop()
	if err := kube.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &old}}); err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("delete the DaemonSet: %w", err)
	}
	deleted = time.Now()
	for ev := range w.ResultChan() {
		if ds, ok := ev.Object.(*appsv1.DaemonSet); ok && ev.Type == watch.Added && ds.UID != old {
			return ds, deleted, time.Now(), nil
		}
	}
	return nil, deleted, time.Time{}, fmt.Errorf("the DaemonSet was not recreated within %s after the API server was back", timeout)
}
