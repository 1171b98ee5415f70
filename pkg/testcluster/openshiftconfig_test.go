package testcluster

import (
	"context"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCreateWithStatusKeepsWhatAReusedDirHas: the first call creates the
// object and writes its status; a later one finds it and leaves the status
// alone when setStatus says so.
func TestCreateWithStatusKeepsWhatAReusedDirHas(t *testing.T) {
	ctx := context.Background()
	versions := configfake.NewClientset().ConfigV1().ClusterVersions()
	setVersion := func(v string) func(*configv1.ClusterVersion) bool {
		return func(cv *configv1.ClusterVersion) bool {
			if cv.Status.Desired.Version != "" {
				return false
			}
			cv.Status.Desired.Version = v
			return true
		}
	}
	for _, v := range []string{"4.22.0", "4.23.0"} {
		cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: clusterVersionName}}
		if err := createWithStatus(ctx, versions, "clusterversion", clusterVersionName, cv, setVersion(v)); err != nil {
			t.Fatal(err)
		}
	}
	cv, err := versions.Get(ctx, clusterVersionName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cv.Status.Desired.Version; got != "4.22.0" {
		t.Errorf("desired version %q, want the first call's 4.22.0", got)
	}
}
