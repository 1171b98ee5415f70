package version

import (
	"context"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/insights-runtime-extractor/controller/internal/testwait"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
)

// clusterVersionAPI is the resource a cluster's discovery lists when it
// serves ClusterVersion.
var clusterVersionAPI = metav1.APIResource{Name: "clusterversions", Kind: "ClusterVersion"}

func clusterVersion(v string) *configv1.ClusterVersion {
	return &configv1.ClusterVersion{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterVersionName},
		Status:     configv1.ClusterVersionStatus{Desired: configv1.Release{Version: v}},
	}
}

func TestFallsBackToEnvWithoutClusterVersionAPI(t *testing.T) {
	s, err := NewSource(fakeapi.ConfigDiscovery(), configfake.NewClientset(), "4.20.0")
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasSynced() || s.Version() != "4.20.0" {
		t.Fatalf("got synced=%v version=%q, want the fallback", s.HasSynced(), s.Version())
	}
}

func TestFollowsClusterVersionAndSignalsOnlyRealChanges(t *testing.T) {
	client := configfake.NewClientset(clusterVersion("4.21.0"))
	watching := fakeapi.WatchStarted(client, "clusterversions")
	s, err := NewSource(fakeapi.ConfigDiscovery(clusterVersionAPI), client, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	testwait.For(t, "the first version", func() bool { return s.HasSynced() && s.Version() == "4.21.0" })
	<-s.Changed() // "" -> 4.21.0
	testwait.For(t, "the watch to start", fakeapi.Closed(watching))

	// A status update that keeps the version signals nothing.
	cv := clusterVersion("4.21.0")
	cv.Status.ObservedGeneration = 7
	if _, err := client.ConfigV1().ClusterVersions().UpdateStatus(ctx, cv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ConfigV1().ClusterVersions().UpdateStatus(ctx, clusterVersion("4.22.0"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the new version", func() bool { return s.Version() == "4.22.0" })
	select {
	case <-s.Changed():
	default:
		t.Fatal("a version change did not signal")
	}
	select {
	case <-s.Changed():
		t.Fatal("an unchanged version signalled")
	default:
	}
}
