package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

func TestReadDaemonSetIsStrictAndFindsTheExtractorImage(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	manifest := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: ds\nspec:\n  template:\n    spec:\n      containers:\n" +
		"      - name: exporter\n        image: quay.io/x/exporter:1\n" +
		"      - name: " + resources.ContainerExtractor + "\n        image: quay.io/x/extractor:1\n"
	if err := os.WriteFile(good, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := ReadDaemonSet(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := ExtractorImage(ds); got != "quay.io/x/extractor:1" {
		t.Errorf("extractor image %q, want quay.io/x/extractor:1", got)
	}
	if got := ExtractorImage(&appsv1.DaemonSet{}); got != "" {
		t.Errorf("extractor image of a DaemonSet without one: %q, want none", got)
	}

	misspelt := filepath.Join(dir, "misspelt.yaml")
	if err := os.WriteFile(misspelt, []byte(strings.Replace(manifest, "template:", "templat:", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDaemonSet(misspelt); err == nil || !strings.Contains(err.Error(), misspelt) {
		t.Errorf("a misspelt field: got %v, want an error naming %s", err, misspelt)
	}
}

func TestSetControllerConfigCreatesThenOverwrites(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	for _, yaml := range []string{"first", "second"} {
		if err := SetControllerConfig(ctx, kube, yaml); err != nil {
			t.Fatal(err)
		}
		cm, err := kube.CoreV1().ConfigMaps(resources.Namespace).Get(ctx, resources.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data[resources.ConfigMapKey]; got != yaml {
			t.Errorf("config %q, want %q", got, yaml)
		}
	}
}

func TestDeleteAndAwaitRecreationReturnsTheNewDaemonSet(t *testing.T) {
	const ns, name = "ns", "ds"
	ctx := context.Background()
	kube := fake.NewClientset(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "old"}})
	// A controller's answer to the deletion: the same name, a new UID.
	kube.PrependReactor("delete", "daemonsets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if err := kube.Tracker().Delete(action.GetResource(), ns, name); err != nil {
			return true, nil, err
		}
		go func() {
			recreated := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "new"}}
			if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx, recreated, metav1.CreateOptions{}); err != nil {
				t.Errorf("recreate: %v", err)
			}
		}()
		return true, nil, nil
	})
	ds, deleted, seen, err := DeleteAndAwaitRecreation(ctx, kube, ns, name, "old", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ds.UID != "new" || deleted.IsZero() || seen.Before(deleted) {
		t.Errorf("got UID %s, deleted at %s, seen at %s; want the new one, seen after the deletion", ds.UID, deleted, seen)
	}
}
