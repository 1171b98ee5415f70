package runtimeextractor

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
)

// While the DaemonSet watch cannot be established (the reflector backs off up
// to 30 s), live reads stand in for it: a deletion is still repaired promptly.
func TestBrokenWatchIsBridgedByLiveReads(t *testing.T) {
	api := fakeapi.New()
	api.Client.PrependWatchReactor("daemonsets", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, nil, errors.New("connection refused")
	})
	c := runWith(t, api, &stubNotifier{cfg: config.Default(), ch: make(chan struct{}, 1)})
	stored := func() *appsv1.DaemonSet { ds, _ := api.Stored(resources.Namespace, resources.DaemonSetName); return ds }
	waitFor(t, "the DaemonSet", func() bool { return stored() != nil })
	first := stored()
	waitFor(t, "a live read to show the created DaemonSet", func() bool { ds, ok := c.informer.current(); return ok && ds.UID == first.UID })

	if err := api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the DaemonSet to be recreated without a watch", func() bool { ds := stored(); return ds != nil && ds.UID != first.UID })
}
